"""TLS to vSphere for real: the lab's simulator serving HTTPS with a certificate signed by a lab CA
(``vcsim.start(..., tls="ca")``), through real ansible-playbook runs of resilient.virt.provider
and vm_info, in both task paths (conftest.py's ``task_path``).

- verification on, the CA given in ``ca_path``: both APIs (SOAP, and REST for tags) work;
- verification on without it: Unauthorized naming the fix, not retryable, tried once, and not a
  provider outage for the circuit breaker;
- verification off: works, with a warning that the certificate is not verified;
- a host name the certificate does not hold: a clear error naming provider.host;
- ``ca_path`` from the environment variable VMWARE_CA_PATH works too;
- a ``ca_path`` that does not exist or holds no certificate: InvalidSpec naming the field (or the
  variable), before any connection.

How many connections a task made is the test's own count: the simulator (Go's net/http) logs one
"TLS handshake error" line for each connection whose handshake failed.
"""
import time

import pytest

from own_simulator import BIN_DIR, vcsim
from playbook_runner import play, run_playbook, store_records

HANDSHAKE_ERROR = "http: TLS handshake error"


@pytest.fixture(scope="module")
def ca_sim(tmp_path_factory):
    """A simulator with a certificate of the lab CA for 127.0.0.1 and localhost:
    (run_dir, provider settings, with ca_path)."""
    run_dir = str(tmp_path_factory.mktemp("vcsim-ca"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, tls="ca", vms=1)
    yield run_dir, settings
    vcsim.stop(run_dir)


@pytest.fixture(scope="module")
def ip_only_sim(tmp_path_factory):
    """A simulator whose certificate (of its lab CA) names 127.0.0.1 only, not localhost."""
    run_dir = str(tmp_path_factory.mktemp("vcsim-ip"))
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, tls="ca", tls_names=("127.0.0.1",), vms=1)
    yield run_dir, dict(settings, name="vcsim-ip-only")
    vcsim.stop(run_dir)


def handshake_errors(run_dir, settle=0.5):
    """Connections whose TLS handshake failed, from the simulator's own log."""
    time.sleep(settle)  # the server logs a failed handshake as it sees the client close
    with open(vcsim.status(run_dir)["log"]) as handle:
        return handle.read().count(HANDSHAKE_ERROR)


def _task(title, module="provider", **args):
    return {"name": title, "resilient.virt." + module: args, "ignore_errors": True}


def _without_ca(settings):
    return dict((key, value) for key, value in settings.items() if key != "ca_path")


def _run(tmp_path, tasks, store):
    # retries on: a failure classified as retryable would be tried 4 times
    return run_playbook(tmp_path, [play(tasks, module_defaults={
        "state_store": store, "resilience": {"max_attempts": 4, "base_delay": "50ms"}})])


def test_verified_with_ca_path(ca_sim, tmp_path):
    run_dir, settings = ca_sim
    assert settings["protocol"] == "https" and "validate_certs" not in settings  # on by default
    before = handshake_errors(run_dir, settle=0)
    from_env = dict(_task("from the environment", provider=_without_ca(settings)),
                    environment={"VMWARE_CA_PATH": settings["ca_path"]})
    run = _run(tmp_path, [_task("validate", provider=settings),
                          _task("list", module="vm_info", provider=settings), from_env],
               "sqlite:///%s" % (tmp_path / "s.db"))
    validate, listed = run.task("validate"), run.task("list")
    assert not run.task("from the environment").failed, run.task("from the environment")
    assert not validate.failed and validate["provider"]["info"]["endpoint"].startswith("https://"), validate
    assert not validate.get("warnings"), validate  # verified: nothing to warn about
    assert not listed.failed and listed["vms"], listed
    assert all(vm["tags"] == [] for vm in listed["vms"]), listed  # the REST session verified too
    assert handshake_errors(run_dir) == before
    assert settings["password"] not in run.output


def test_untrusted_certificate_is_not_retried_nor_an_outage(ca_sim, ip_only_sim, tmp_path):
    run_dir, settings = ca_sim
    ip_dir, ip_settings = ip_only_sim
    store = "sqlite:///%s" % (tmp_path / "s.db")
    before, ip_before = handshake_errors(run_dir, settle=0), handshake_errors(ip_dir, settle=0)
    run = _run(tmp_path, [_task("untrusted", provider=_without_ca(settings)),
                          _task("mismatch", provider=dict(ip_settings, host="localhost"))], store)
    assert "Traceback" not in run.output and settings["password"] not in run.output
    untrusted = run.task("untrusted")
    assert untrusted.failed and untrusted["error"]["type"] == "Unauthorized", untrusted
    assert untrusted["error"]["retryable"] is False
    assert "provider.ca_path" in untrusted["msg"] and "validate_certs: false" in untrusted["msg"]
    assert untrusted["error"]["details"]["attempts"] == 1
    mismatch = run.task("mismatch")
    assert mismatch.failed and mismatch["error"]["type"] == "Unauthorized", mismatch
    assert mismatch["error"]["retryable"] is False
    assert "not valid for the host name 'localhost'" in mismatch["msg"], mismatch
    assert "provider.host" in mismatch["msg"]
    # the simulators' own count: one connection each, so one attempt each
    assert handshake_errors(run_dir) - before == 1
    assert handshake_errors(ip_dir) - ip_before == 1
    breakers = store_records(store, "breaker")
    assert set(breakers) == {"vsphere:vcsim", "vsphere:vcsim-ip-only"}, breakers
    for record in breakers.values():
        assert record["state"] == "closed" and record["failures_total"] == 0, record
        assert record["consecutive_failures"] == 0, record


def test_verification_off_works_with_a_warning(ca_sim, tmp_path):
    run_dir, settings = ca_sim
    run = _run(tmp_path, [_task("off", provider=dict(_without_ca(settings), validate_certs=False))],
               "sqlite:///%s" % (tmp_path / "s.db"))
    off = run.task("off")
    assert not off.failed and off["provider"]["info"]["endpoint"].startswith("https://"), off
    assert any("certificate of 127.0.0.1:%d is not verified" % settings["port"] in w
               for w in off["warnings"]), off


def test_a_bad_ca_path_is_refused_naming_the_field(ca_sim, tmp_path):
    run_dir, settings = ca_sim
    not_a_certificate = tmp_path / "key.pem"
    not_a_certificate.write_text("-----BEGIN PRIVATE KEY-----\nnot a certificate\n"
                                 "-----END PRIVATE KEY-----\n")
    empty_dir = tmp_path / "cas"
    empty_dir.mkdir()
    cases = {"missing": (str(tmp_path / "nope.pem"), "does not exist"),
             "not a certificate": (str(not_a_certificate), "holds no usable CA certificate"),
             "empty directory": (str(empty_dir), "openssl rehash")}
    from_env = dict(_task("missing, from the environment", provider=_without_ca(settings)),
                    environment={"VMWARE_CA_PATH": str(tmp_path / "gone.pem")})
    before = handshake_errors(run_dir, settle=0)
    run = _run(tmp_path, [_task(title, provider=dict(settings, ca_path=path))
                          for title, (path, _says) in cases.items()] + [from_env],
               "sqlite:///%s" % (tmp_path / "s.db"))
    env_result = run.task("missing, from the environment")
    assert env_result["error"]["type"] == "InvalidSpec", env_result
    assert "VMWARE_CA_PATH" in env_result["msg"] and "does not exist" in env_result["msg"]
    assert "Traceback" not in run.output
    for title, (path, says) in cases.items():
        result = run.task(title)
        assert result.failed and result["error"]["type"] == "InvalidSpec", result
        assert "provider.ca_path" in result["msg"] and says in result["msg"], result
        assert path in result["msg"]
    assert handshake_errors(run_dir) == before  # refused before any connection
