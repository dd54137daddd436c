"""TLS trust of the providers that speak HTTPS (vSphere, Proxmox VE): the SSL context of their
sessions, the check of ``ca_path``, and what a certificate that fails verification means to the
user.

The context verifies the server certificate and its host name against the system's trusted CAs,
or only against ``ca_path`` when given (a PEM bundle file, or a directory of CA certificates
named by subject hash as ``openssl rehash`` makes them); ``validate_certs`` false verifies
nothing. A certificate that fails verification is Unauthorized (not retried, and not a provider
outage for the circuit breaker) with the fix: trust the CA through ``ca_path``, or use a host
name the certificate holds.
"""
import os
import re
import ssl

from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Unauthorized, _chain, field_error, redact)

__all__ = ("check_ca_path", "ssl_context", "certificate_error")

# OpenSSL's names of the certificates of a CA directory: <subject hash>.<n> (``openssl rehash``)
_HASHED = re.compile(r"^[0-9a-f]{8}\.[0-9]+$")
# X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
_NAME_MISMATCH = (62, 64)
_WHAT = "a PEM file of CA certificates, or a directory of them named by subject hash"


def check_ca_path(path, where):
    """``path`` (``~`` expanded) once it holds CA certificates; InvalidSpec naming ``where``
    (``provider.ca_path`` or its environment variable) and the fix otherwise."""
    full = os.path.abspath(os.path.expanduser(path))
    if os.path.isdir(full):
        try:
            hashed = [name for name in os.listdir(full) if _HASHED.match(name)]
        except OSError as exc:
            raise field_error(where, "cannot read the directory %s (%s); give %s"
                              % (full, exc.strerror, _WHAT)) from None
        if not hashed:
            raise field_error(where, "the directory %s holds no CA certificate named by subject "
                              "hash (<hash>.0); run `openssl rehash %s`, or give a PEM file of "
                              "the CA certificates" % (full, full))
        return full
    if not os.path.exists(full):
        raise field_error(where, "%s does not exist; give %s (the CA that signed the server's "
                          "certificate)" % (full, _WHAT))
    try:
        ssl.create_default_context(cafile=full)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise field_error(where, "%s holds no usable CA certificate (%s); give %s"
                          % (full, redact(exc), _WHAT)) from None
    return full


def ssl_context(config):
    """The SSL context of a provider's sessions (None for http; ``config`` has ``protocol``,
    ``validate_certs`` and perhaps ``ca_path``); see the module's docstring."""
    if config["protocol"] != "https":
        return None
    # always an explicit context: given none, pyVmomi skips verification for localhost
    ca_path = config.get("ca_path")
    if ca_path is None or not config["validate_certs"]:
        context = ssl.create_default_context()
    elif os.path.isdir(ca_path):
        context = ssl.create_default_context(capath=ca_path)
    else:
        context = ssl.create_default_context(cafile=ca_path)
    if not config["validate_certs"]:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _verification_failure(exc):
    for cur in _chain(exc):
        if isinstance(cur, ssl.SSLCertVerificationError):
            return cur
    return None


def certificate_error(exc, config, where, ca_where):
    """Unauthorized for a server certificate that ``exc`` (or an exception behind it) says
    failed verification, else None. ``where`` names the endpoint (and API), ``ca_where`` the
    ``ca_path`` option as the user gave it."""
    failure = _verification_failure(exc)
    if failure is None:
        return None
    reason = (failure.verify_message or redact(failure)).rstrip(".")
    details = {"verify_code": failure.verify_code}
    if failure.verify_code in _NAME_MISMATCH:
        return Unauthorized(
            "the TLS certificate of %s is not valid for the host name %r (%s): set "
            "provider.host to a name the certificate holds (its subject alternative names), or "
            "have the certificate reissued for %s" % (where, config["host"], reason,
                                                      config["host"]),
            cause=exc, details=details)
    if config.get("ca_path"):
        fix = ("the CAs of %s (%s) do not include the one that signed it: give that CA in %s"
               % (ca_where, config["ca_path"], ca_where))
    else:
        fix = ("the system's trusted CAs do not include the one that signed it: give that CA in "
               "provider.ca_path (%s)" % _WHAT)
    return Unauthorized("the TLS certificate of %s failed verification (%s); %s, or, for a lab "
                        "only, set provider.validate_certs: false"
                        % (where, reason, fix), cause=exc, details=details)
