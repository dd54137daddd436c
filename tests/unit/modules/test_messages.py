"""Messages and warnings that say what happened: a mistyped VM name, an unsafe store directory,
Ansible's own argument errors unmasked."""
import os

from tests.unit.modules.test_fuzz import GOOD_PROVIDER, MODULES, run_module


def test_a_mistyped_vm_name_says_no_vm_of_that_name_exists_then_how_to_create_one(tmp_path):
    result, printed = run_module(MODULES["vm"], {
        "provider": GOOD_PROVIDER, "name": "tset", "state": "running",
        "state_store": "sqlite://%s" % (tmp_path / "s.db")})
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
    message = result["msg"]
    assert "no VM named 'tset' on libvirt:fuzz exists" in message, message
    assert message.index("exists") < message.index("to create one, set vcpus and memory_mb"), message
    assert {e["path"] for e in result["error"]["details"]["errors"]} == {"vcpus", "memory_mb"}


def test_a_short_secret_does_not_mask_ansibles_own_argument_errors(tmp_path):
    # a one-character user_data is registered as a no_log value; masking every space with it
    # would garble "one of the following is required"
    result, printed = run_module(MODULES["vm"], {
        "provider": GOOD_PROVIDER, "cloud_init": {"user_data": " "},
        "state_store": "sqlite://%s" % (tmp_path / "s.db")})
    assert result["failed"] and result["error"]["type"] == "InvalidSpec", printed
    assert result["msg"].startswith("InvalidSpec: one of the following is required: name"), result


def _warnings(tmp_path, mode):
    directory = tmp_path / ("dir-%o" % mode)
    directory.mkdir()
    os.chmod(directory, mode)
    result, printed = run_module(MODULES["circuit_breaker"], {
        "state_store": "sqlite://%s" % (directory / "state.db")})
    assert not result.get("failed"), printed
    assert oct(os.stat(directory).st_mode & 0o7777) == oct(mode), "the directory was changed"
    return [str(w) for w in result.get("warnings", []) if "state store's directory" in str(w)]


def test_a_store_directory_others_can_write_is_warned_about_with_the_fix(tmp_path):
    (warning,) = _warnings(tmp_path, 0o777)
    assert "mode 0777" in warning and "chmod 700" in warning and str(tmp_path) in warning
    assert _warnings(tmp_path, 0o700) == []
    assert _warnings(tmp_path, 0o1777) == []  # sticky, like /tmp: others cannot replace the file
