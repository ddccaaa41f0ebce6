"""A pytest plugin (pyproject's addopts: `-p tests.support.instance`): the test run prepares the instance
(var/ and its secrets, see chatapp.instance) the way every entry point does, before pytest-django reads
the settings — which only read."""

from chatapp.instance import instance_prepare

instance_prepare()
