import os

import pytest


def pytest_collection_modifyitems(config, items):
    if os.environ.get("VMSCHED_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="full-length reproduction: set VMSCHED_SLOW=1 (its short form runs always)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
