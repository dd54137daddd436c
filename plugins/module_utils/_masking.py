# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which values are secrets, and how they are kept out of results, logs and the state store.

A value is secret when it sits under a key whose name says so (:func:`is_secret_key`: it
contains ``pass``, ``pwd``, ``secret``, ``token``, ``api_key``, ``apikey``, ``private_key``,
``credential``, ``user_data`` (cloud-init user data carries passwords and keys), or a fragment
of a misspelt ``password``, or is ``kg`` (an IPMI BMC key); but not ``token_id``, the id of an
API token, which names the token as a user name does and is shown in logs by the platforms that
issue it), or when it is the password part of a URL (``scheme://user:PASSWORD@host``,
``user:PASSWORD@host``, or a ``password=``/``token=`` query parameter, also with a prefix such
as ``sentinel_password=``).
Names decide, not the provider type, so secrets are found in a module's raw arguments before
anything else is loaded or validated. Values shorter than :data:`MIN_LENGTH` characters are not
treated as secrets: Ansible masks a secret wherever it appears as a substring, so a one-letter
"password" would garble every word of a result (error types included) while protecting nothing.
Backends must name their secret options accordingly
(``providers.contract.Provider`` refuses a secret option with any other name).
An environment variable holds a secret when its name ends with one of :data:`SECRET_VARIABLE_ENDINGS`
(:func:`is_secret_variable`: ``VMWARE_PASSWORD``, what AWX credentials inject; not ``PWD`` or
``ANSIBLE_BECOME_ASK_PASS``); :func:`environment_secrets` finds their values, and the passwords
inside URLs of any variable, in a task's environment.
"""
import re

__all__ = ("MASK", "MIN_LENGTH", "SECRET_VARIABLE_ENDINGS", "is_secret_key", "is_secret_variable", "secret_values",
           "environment_secrets", "url_passwords", "redact", "scrub")

MASK = "********"
MIN_LENGTH = 4
_MARKERS = ("pass", "pasw", "pwd", "pword", "sword", "secret", "token", "api_key", "apikey",
            "private_key", "privatekey", "credential", "user_data")
# names with a marker that hold no secret (the whole name, in any case)
_NOT_SECRET = frozenset(("token_id",))
# names without a marker that hold a secret (the whole name, in any case)
_SECRET_NAMES = frozenset(("kg",))
SECRET_VARIABLE_ENDINGS = ("PASSWORD", "PASSWD", "PASSPHRASE", "TOKEN", "SECRET", "API_KEY", "APIKEY",
                           "PRIVATE_KEY", "CREDENTIAL", "CREDENTIALS")
_URL_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<info>[^/@\s]*)@")
_SECRET_PARAM = re.compile(r"(?i)\b((?:[a-z0-9]+_)*(?:pass\w*|pasw\w*|pwd|token|secret|api_key))=([^&\s'\"]+)")
_BARE_USERINFO = re.compile(r"^[^@/\s:]+:(?P<password>(?!/)[^@\s]+)@\S+$")  # user:password@host


def is_secret_key(name):
    """True when a setting called ``name`` holds a secret (see the module docstring)."""
    key = str(name).lower()
    return key in _SECRET_NAMES or (key not in _NOT_SECRET and any(marker in key for marker in _MARKERS))


def is_secret_variable(name):
    """True when the environment variable ``name`` holds a secret (see the module docstring)."""
    return str(name).upper().endswith(SECRET_VARIABLE_ENDINGS)


def environment_secrets(environ):
    """The secrets of the environment ``environ`` (a mapping): the values of its secret variables
    and the passwords inside URLs of any variable, as :func:`secret_values` gives them."""
    found = set(secret_values([value for name, value in environ.items() if is_secret_variable(name)], True))
    found.update(secret_values([value for value in environ.values() if "@" in value or "=" in value]))
    return sorted(found, key=lambda text: (-len(text), text))


def url_passwords(text):
    """The passwords written inside URLs in ``text`` (userinfo after ``:``, password= params),
    and in a whole ``text`` of the form ``user:password@host``."""
    found = []
    bare = _BARE_USERINFO.match(text)
    if bare:
        found.append(bare.group("password"))
    for match in _URL_USERINFO.finditer(text):
        user, colon, password = match.group("info").partition(":")
        if colon and password:
            found.append(password)
    found.extend(match.group(2) for match in _SECRET_PARAM.finditer(text))
    return found


def secret_values(value, secret=False):
    """Every secret string inside ``value`` (dicts, lists, strings), each once, longest first."""
    found = set()
    secret_keys = {}  # key -> is_secret_key(key): fleets repeat the same few keys

    def walk(item, under_secret):
        if isinstance(item, dict):
            for key, sub in item.items():
                if key not in secret_keys:
                    secret_keys[key] = is_secret_key(key)
                walk(sub, under_secret or secret_keys[key])
        elif isinstance(item, (list, tuple)):
            for sub in item:
                walk(sub, under_secret)
        elif item is not None and not isinstance(item, bool):
            text = str(item)
            if under_secret and text:
                found.add(text)
            if "@" in text or "=" in text:  # what every pattern of url_passwords needs
                found.update(url_passwords(text))

    walk(value, secret)
    return sorted((text for text in found if len(text) >= MIN_LENGTH),
                  key=lambda text: (-len(text), text))


def redact(text):
    """``text`` with URL user information and ``password=``-like parameters replaced by ``***``."""
    text = _URL_USERINFO.sub(r"\g<scheme>***@", str(text))
    return _SECRET_PARAM.sub(r"\1=***", text)


def scrub(text, secrets):
    """``text`` redacted, with every string of ``secrets`` replaced by :data:`MASK`."""
    text = str(text)
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return redact(text)
