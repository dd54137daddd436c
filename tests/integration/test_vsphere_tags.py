"""vSphere tags through the simulator's vSphere Automation REST API (lab/vcsim serves it).

The oracle is the REST API itself, read with requests and a session of the test's own
(rest_session.py), and pyVmomi for the VMs' moIds; the code under test is the provider's tag
client (tagging.py).
"""
import ssl
import time

import pytest
import requests

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    NotSupported, Timeout, Unauthorized, Unavailable, VirtError, classify)
from ansible_collections.resilient.virt.plugins.module_utils.providers._vsphere.backend import (
    VSphereProvider)

from rest_session import Rest, base_url, verify
from own_simulator import BIN_DIR, vcsim
from simulator_session import Simulator
from soap_only import soap_only_simulator

VMS = ("DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1", "DC0_C1_RP0_VM0")


@pytest.fixture
def sim(tmp_path):
    """A simulator of this test's own: (run_dir, settings)."""
    run_dir = str(tmp_path / "vcsim")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR)
    yield run_dir, settings
    vcsim.stop(run_dir)


@pytest.fixture
def moids(sim):
    """{VM name: moId}, read with pyVmomi."""
    oracle = Simulator(sim[1])
    try:
        yield dict((name, oracle.vm(name)._moId) for name in VMS)
    finally:
        oracle.close()


def open_provider(settings, **options):
    return VSphereProvider(dict(settings, **dict({"timeout": "5s"}, **options)))


def fails(fn, *args):
    """The classified error of ``fn(*args)``, as GuardedProvider classifies it."""
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - classified as GuardedProvider does
        return classify(exc)
    pytest.fail("%s succeeded" % getattr(fn, "__name__", fn))


def test_set_creates_the_category_and_tags_and_is_idempotent(sim, moids):
    settings = sim[1]
    rest = Rest(settings)
    vm = moids["DC0_C0_RP0_VM0"]
    p = open_provider(settings)
    try:
        assert p._tags().tags_of([vm]) == {vm: []}
        assert "resilient.virt" not in rest.categories()  # reading created nothing
        assert p._tags().set_tags(vm, ["web", "db"]) is True
        category = rest.categories()["resilient.virt"]
        assert category["cardinality"] == "MULTIPLE"
        assert category["associable_types"] == ["VirtualMachine"]
        assert rest.tags_on(vm) == {"resilient.virt": ["db", "web"]}
        assert p._tags().set_tags(vm, ["db", "web"]) is False
        assert rest.tags_on(vm) == {"resilient.virt": ["db", "web"]}
    finally:
        p.close()


def test_set_changes_only_its_category_and_only_that_vm(sim, moids):
    settings = sim[1]
    rest = Rest(settings)
    vm, other = moids["DC0_C0_RP0_VM0"], moids["DC0_C1_RP0_VM0"]
    foreign = rest.create_category("ops")
    rest.tag(foreign, "web", vm)  # same name, other category
    p = open_provider(settings, tag_category="team-a")
    try:
        p._tags().set_tags(vm, ["web", "db"])
        p._tags().set_tags(other, ["web"])
        assert p._tags().set_tags(vm, ["db", "cache"]) is True
        assert rest.tags_on(vm) == {"ops": ["web"], "team-a": ["cache", "db"]}
        assert rest.tags_on(other) == {"team-a": ["web"]}
        assert p._tags().set_tags(vm, []) is True
        assert rest.tags_on(vm) == {"ops": ["web"]}
    finally:
        p.close()


def test_read_many_vms_in_one_request_matches_the_oracle(sim, moids):
    settings = sim[1]
    rest = Rest(settings)
    writer = open_provider(settings)
    writer._tags().set_tags(moids["DC0_C0_RP0_VM0"], ["a", "b"])
    writer._tags().set_tags(moids["DC0_C0_RP0_VM1"], ["b"])
    writer.close()
    p = open_provider(settings)  # a fresh session: learns the tag names from the server
    try:
        found = p._tags().tags_of(moids.values())
        for moid in moids.values():
            assert found[moid] == rest.tags_on(moid).get("resilient.virt", [])
        assert found[moids["DC0_C0_RP0_VM0"]] == ["a", "b"]
    finally:
        p.close()


def test_a_listing_logs_in_and_finds_the_category_while_its_soap_query_runs(
        tmp_path, monkeypatch):
    """The REST requests of a VM listing (recorded on the provider's real connections) overlap
    its VM query, which the simulator slows down to 1 s: after the query only the batched read
    of the VMs' tags (and the names of tags the session has not met) is left."""
    run_dir = str(tmp_path / "vcsim")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, vms=1,
                           method_delay="RetrievePropertiesEx=1000")
    try:
        oracle = Simulator(settings)
        moid = oracle.vm("DC0_C0_RP0_VM0")._moId
        oracle.close()
        writer = open_provider(settings)
        writer._tags().set_tags(moid, ["web"])
        writer.close()
        events, send = [], requests.Session.request

        def request(session, method, url, *args, **kwargs):
            response = send(session, method, url, *args, **kwargs)
            events.append(url.split("/cis/")[1])
            return response
        monkeypatch.setattr(requests.Session, "request", request)
        p = open_provider(settings)
        try:
            p.list_hypervisors()
            assert events == []
            stub = p._connection().si._stub
            invoke = stub.InvokeMethod

            def query(mo, info, args, outerStub=None):
                result = invoke(mo, info, args, outerStub)
                events.append(info.wsdlName)
                return result
            stub.InvokeMethod = query
            vms = dict((vm["name"], vm["tags"]) for vm in p.list_vm_summaries())
            stub.InvokeMethod = invoke
        finally:
            p.close()
    finally:
        vcsim.stop(run_dir)
    assert vms == {"DC0_C0_RP0_VM0": ["web"], "DC0_C1_RP0_VM0": []}
    ended = events.index("RetrievePropertiesEx")
    assert "session" in events[:ended] and "tagging/category" in events[:ended]
    after = events[ended + 1:]
    assert after[0] == "tagging/tag-association?~action=list-attached-tags-on-objects"
    assert after[-1] == "session"  # the logout, by close()
    assert all(e.startswith("tagging/tag/id:") for e in after[1:-1]), after


def test_logout_on_close(sim, moids):
    settings = sim[1]
    p = open_provider(settings)
    session_id = p._tags()._session_id
    check = requests.get(base_url(settings) + "/tagging/category", verify=verify(settings),
                         headers={"vmware-api-session-id": session_id})
    assert check.status_code == 200
    p.close()
    check = requests.get(base_url(settings) + "/tagging/category", verify=verify(settings),
                         headers={"vmware-api-session-id": session_id})
    assert check.status_code == 401


def test_wrong_password_is_refused_by_the_rest_api(sim):
    settings = sim[1]
    wrong = "Wrong-Pa55word-rest"
    raw = requests.post(base_url(settings) + "/session", verify=verify(settings),
                        auth=(settings["username"], wrong))
    assert raw.status_code == 401  # the simulator's own answer (lab/vcsim checks the password)
    err = fails(open_provider(settings, password=wrong)._tags)
    assert isinstance(err, Unauthorized) and "provider.password" in err.message
    assert wrong not in err.message and wrong not in repr(err.to_dict())


def test_restarted_server_ends_the_session_and_the_next_call_logs_in(sim, moids):
    run_dir, settings = sim
    vm = moids["DC0_C0_RP0_VM0"]
    p = open_provider(settings)
    try:
        client = p._tags()
        old_id = client._session_id
        client.set_tags(vm, ["web"])
        vcsim.stop(run_dir)
        err = fails(client.tags_of, [vm])
        assert isinstance(err, Unavailable) and err.retryable
        assert vcsim.start(run_dir, bin_dir=BIN_DIR)["port"] == settings["port"]
        err = fails(client.tags_of, [vm])  # the new server does not know the session
        assert isinstance(err, Unavailable) and "logs in again" in err.message
        assert old_id not in err.message
        assert p._tags().tags_of([vm]) == {vm: []}  # a new simulator starts without tags
    finally:
        p.close()


def test_hung_server_times_out(sim, moids):
    run_dir, settings = sim
    p = open_provider(settings, timeout="1s")
    client = p._tags()
    vcsim.pause(run_dir)
    try:
        started = time.monotonic()
        err = fails(client.tags_of, [moids["DC0_C0_RP0_VM0"]])
        assert isinstance(err, Timeout) and "did not answer within 1s" in err.message
        assert time.monotonic() - started < 3
        started = time.monotonic()
        p.close()  # the logout is bounded too
        assert time.monotonic() - started < 3
    finally:
        vcsim.resume(run_dir)


@pytest.fixture
def soap_only(tmp_path):
    with soap_only_simulator(tmp_path) as settings:
        yield settings


def test_an_endpoint_without_the_rest_api_is_not_supported(soap_only):
    p = open_provider(soap_only)
    try:
        assert p.validate()["api_type"] == "VirtualCenter"  # the SOAP API answers
        err = fails(p._tags)
        assert isinstance(err, NotSupported) and not err.retryable
        assert "tags need vCenter" in err.message and "provider.host" in err.message
    finally:
        p.close()


@pytest.fixture
def tls_sim(tmp_path):
    """A simulator serving HTTPS with a self-signed certificate: (settings, certificate file)."""
    run_dir = str(tmp_path / "vcsim")
    settings = vcsim.start(run_dir, bin_dir=BIN_DIR, tls=True)
    cert = tmp_path / "vcsim.pem"
    cert.write_text(ssl.get_server_certificate((settings["host"], settings["port"])))
    yield settings, str(cert)
    vcsim.stop(run_dir)


def test_tls_is_verified_with_the_trust_of_the_soap_session(tls_sim, monkeypatch):
    settings, cert = tls_sim
    vm_ids = ["vm-unknown"]
    verified = dict(settings, validate_certs=True)
    untrusted = open_provider(verified)
    # requests' own CA bundle is not the SOAP session's trust: trusting the server there is not enough
    monkeypatch.setattr(requests.adapters, "DEFAULT_CA_BUNDLE_PATH", cert)
    for fn in (untrusted.validate, untrusted._tags):
        err = fails(fn)
        assert isinstance(err, Unauthorized) and "certificate" in err.message, err
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # the system's trust, as OpenSSL reads it
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/nonexistent")  # ignored: not the SOAP trust
    trusted = open_provider(verified)
    try:
        assert trusted.validate()["endpoint"].startswith("https://")
        assert trusted._tags().tags_of(vm_ids) == {"vm-unknown": []}
    finally:
        trusted.close()
    unverified = open_provider(dict(settings, validate_certs=False))
    monkeypatch.delenv("SSL_CERT_FILE")
    try:
        assert unverified._tags().tags_of(vm_ids) == {"vm-unknown": []}
        assert any("validate_certs" in w for w in unverified.warnings)
    finally:
        unverified.close()


def test_errors_never_show_secrets(sim, moids):
    run_dir, settings = sim
    p = open_provider(settings, timeout="1s")
    client = p._tags()
    session_id = client._session_id
    errors = [fails(open_provider(settings, password="Wr0ng-secret")._tags)]
    vcsim.pause(run_dir)
    try:
        errors.append(fails(client.tags_of, [moids["DC0_C0_RP0_VM0"]]))
    finally:
        vcsim.resume(run_dir)
    vcsim.stop(run_dir)
    errors.append(fails(client.set_tags, moids["DC0_C0_RP0_VM0"], ["x"]))
    assert all(isinstance(e, VirtError) for e in errors)
    for err in errors:
        text = repr(err) + repr(err.to_dict())
        for secret in (settings["password"], "Wr0ng-secret", session_id):
            assert secret not in text
