from django.urls import include, path

from chatapp.chat import account_pages, archive_views, prompt_file_views, settings_views, views
from chatapp.chat import share_views as share_pages

urlpatterns = [
    path("", views.chat_new, name="chat-home"),
    path("c/new/", views.chat_new, name="chat-new"),
    path("c/<int:pk>/", views.chat_detail, name="chat-detail"),
    path("c/<int:pk>/messages/", views.chat_messages_before, name="chat-messages-before"),
    path("c/sidebar/", views.chat_sidebar, name="chat-sidebar"),
    path("settings/", settings_views.settings_page, name="settings"),
    path("settings/instructions/", settings_views.instructions_save, name="settings-instructions"),
    path("settings/api-token/", settings_views.api_token_create, name="api-token-create"),
    path("settings/api-tokens/<int:pk>/revoke/", settings_views.api_token_revoke, name="api-token-revoke"),
    path("settings/shares/<int:pk>/revoke/", share_pages.share_revoke, name="share-revoke"),
    path("settings/archived/<int:pk>/restore/", archive_views.archived_restore, name="archived-restore"),
    path("settings/archived/<int:pk>/delete/", archive_views.archived_delete, name="archived-delete"),
    path("settings/archived/all/", archive_views.archived_all, name="archived-all"),
    path("settings/prompts/new/", settings_views.prompt_add, name="prompt-add"),
    path("settings/prompts/export/", prompt_file_views.prompt_export, name="prompt-export"),
    path("settings/prompts/import/", prompt_file_views.prompt_import, name="prompt-import"),
    path("settings/prompts/<int:pk>/", settings_views.prompt_edit, name="prompt-edit"),
    path("settings/prompts/<int:pk>/delete/", settings_views.prompt_remove, name="prompt-remove"),
    path("settings/configs/new/", settings_views.config_create, name="config-create"),
    path("settings/configs/<int:pk>/", settings_views.config_update, name="config-update"),
    path("settings/configs/<int:pk>/delete/", settings_views.config_delete, name="config-delete"),
    path("settings/configs/<int:pk>/default/", settings_views.config_make_default, name="config-default"),
    path("assets/code.css", views.code_css, name="code-css"),
    # A read-only share link: public, no login (share_views).
    path("s/<slug:token>/", share_pages.share_page, name="share-page"),
    path("s/<slug:token>/images/<int:pk>/", share_pages.share_image, name="share-image"),
    path("accounts/signup/", account_pages.signup, name="signup"),
    path(
        "accounts/login/",
        views.page_csp(views.LoginView.as_view()),
        name="login",
    ),
    path("accounts/logout/", views.page_csp(account_pages.LogoutView.as_view()), name="logout"),
    path("accounts/password/", views.password_change, name="password_change"),
    path("accounts/password/done/", views.password_changed, name="password-changed"),
    path("accounts/delete/", account_pages.account_delete, name="account-delete"),
]

# The dashboard pages (/c/<pk>/dashboard/, /dashboard/) and their downloads.
urlpatterns.append(path("", include("chatapp.dashboard.urls")))
