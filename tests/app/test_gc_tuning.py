import gc

import pytest

from chatapp.gc_tuning import YOUNG_THRESHOLD, gc_tune_for_serving


@pytest.fixture
def collector_restored():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_serving_freezes_what_is_loaded_and_collects_the_young_generation_less_often(collector_restored):
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    loaded = object.__new__(type("Loaded", (), {}))  # tracked by the collector, alive before serving

    gc_tune_for_serving()

    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    assert gc.get_freeze_count() > 0
    assert not any(o is loaded for o in gc.get_objects())  # frozen objects are in no generation
