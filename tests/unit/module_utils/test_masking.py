"""masking: which values are secrets, found in raw arguments before anything is validated."""
import pytest

from ansible_collections.resilient.virt.plugins.module_utils._masking import (
    MASK, is_secret_key, redact, scrub, secret_values, url_passwords)


@pytest.mark.parametrize("key", ["password", "PASSWORD", "passwd", "pasword", "passwort",
                                 "db_pwd", "api_token", "token", "client_secret", "api_key",
                                 "apikey", "private_key", "credentials", "sasl_passphrase", "kg", "KG"])
def test_secret_names(key):
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["username", "user", "host", "port", "uri", "name", "type",
                                 "az", "traits", "validate_certs", "timeout", "storage_pool",
                                 "token_id", "TOKEN_ID"])
def test_ordinary_names(key):
    assert not is_secret_key(key)


@pytest.mark.parametrize("key", ["token_id_secret", "api_token_id", "token_idx", "tokenid",
                                 "token_secret", "id_token"])
def test_only_the_whole_name_token_id_is_not_a_secret(key):
    assert is_secret_key(key)


def test_an_api_tokens_id_is_shown_and_its_secret_hidden():
    provider = {"type": "proxmox", "token_id": "automation@pve!ansible",
                "token_secret": "5f0c2a3e-3b5e-4c1a-9d8e-0a1b2c3d4e5f"}
    assert secret_values({"provider": provider}) == ["5f0c2a3e-3b5e-4c1a-9d8e-0a1b2c3d4e5f"]


def test_values_under_secret_keys_and_inside_urls_are_found_anywhere():
    params = {
        "name": "web1",
        "state_store": "redis://:R3dis-pw@cache:6379/0",
        "providers": {
            "vc": {"type": "vsphere", "username": "admin", "password": "Vc-S3cret"},
            "kvm": {"uri": "qemu+tcp://bob:Lv-S3cret@kvm1/system"},
            "odd": {"host": "root:H0st-S3cret@10.0.0.1", "Api_Token": 12345678},
            "list": [{"credentials": {"user": "u", "value": "Nested-S3cret"}}],
        },
        "url": "https://vc/sdk?user=x&password=Query-S3cret&x=1",
    }
    found = secret_values(params)
    # everything under "credentials" counts ("u" is too short to be masked)
    assert set(found) == {"R3dis-pw", "Vc-S3cret", "Lv-S3cret", "H0st-S3cret", "12345678",
                          "Nested-S3cret", "Query-S3cret"}
    assert found == sorted(found, key=lambda text: (-len(text), text))  # longest first
    for ordinary in ("web1", "admin", "bob", "root", "kvm1", "vc"):
        assert ordinary not in found


def test_too_short_values_are_not_secrets():
    """Ansible masks by substring: a one-letter "password" would garble every word."""
    assert secret_values({"password": "p", "token": "abc", "secret": "abcd"}) == ["abcd"]
    assert secret_values("redis://:p@h:1/0") == []


def test_url_passwords_and_redaction():
    assert url_passwords("redis://:pw1234@h:1/0 and qemu+ssh://u:pw5678@h/system") == [
        "pw1234", "pw5678"]
    assert url_passwords("qemu+ssh://user@host/system") == []  # a user name is not a secret
    assert url_passwords("admin:Secret99@vc.example.com") == ["Secret99"]
    assert url_passwords("qemu+tcp://bob:pw@127.0.0.1/system") == ["pw"]
    assert redact("redis://:pw@h:1/0 token=abc") == "redis://***@h:1/0 token=***"
    sentinel = "redis+sentinel://:Srv-pw99@h1:1,h2:2/svc/0?sentinel_password=Sent-pw99&x=1"
    assert url_passwords(sentinel) == ["Srv-pw99", "Sent-pw99"]
    assert redact(sentinel) == "redis+sentinel://***@h1:1,h2:2/svc/0?sentinel_password=***&x=1"
    assert redact("?sentinel_pasword=Typo-pw99") == "?sentinel_pasword=***"  # a misspelt name too
    assert redact("bypass=1&compass=2") == "bypass=1&compass=2"


def test_scrub_removes_given_secrets_and_url_passwords():
    text = "login as admin with Vc-S3cret to https://admin:Vc-S3cret@vc/sdk failed"
    assert scrub(text, ["Vc-S3cret"]) == (
        "login as admin with %s to https://***@vc/sdk failed" % MASK)
