"""hlsnn.deploy's rooms by stage (issue 80): every module of before at its new path, and the old
flat paths still importing the same module objects, with a DeprecationWarning naming the new path."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import hlsnn.deploy as deploy


@pytest.mark.parametrize("name", sorted(deploy.MOVED))
def test_every_moved_module_is_in_its_room(name):
    mod = importlib.import_module(f"hlsnn.deploy.{deploy.MOVED[name]}.{name}")
    assert mod.__name__ == f"hlsnn.deploy.{deploy.MOVED[name]}.{name}"


def test_an_old_path_imports_the_same_module_with_a_warning_naming_the_new_one():
    code = ("import warnings; warnings.simplefilter('error')\n"
            "try:\n    import hlsnn.deploy.runner\nexcept DeprecationWarning as e:\n    print(e)\n"
            "warnings.simplefilter('ignore')\n"
            "from hlsnn.deploy.runner import Deployment\nimport hlsnn.deploy.run.runner as new\n"
            "import hlsnn.deploy.program as old\nimport hlsnn.deploy.lower.program as newp\n"
            "print(Deployment is new.Deployment, old is newp, newp.__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "hlsnn.deploy.runner moved to hlsnn.deploy.run.runner (issue 80); import it from there"
    assert out[1] == "True True hlsnn.deploy.lower.program"


def test_a_name_that_never_was_a_module_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'no_such_room'"):
        deploy.no_such_room
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hlsnn.deploy.no_such_module")
