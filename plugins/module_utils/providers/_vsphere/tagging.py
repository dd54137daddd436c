"""vSphere tags of VMs through the vSphere Automation REST API of a vCenter (``/rest``).

Tags live in that API, not in the SOAP API. A :class:`TagClient` is one REST session (a
``requests.Session``, imported on first use), logged in with the provider's credentials and
logged out by ``close()``. It works on the tags of one category (the provider's
``tag_category``, cardinality MULTIPLE, for VirtualMachine), which it creates when it first
sets a tag; tags of other categories are never touched. Reads never create anything, and
cost one request once the session knows the category and the tags it meets (tag ids never
change category; a tag renamed meanwhile shows its old name until the next session).

TLS is what the SOAP session does: ``ssl_context`` (the provider's) is the only trust, and no
proxy, ``.netrc`` or CA bundle is taken from the environment; a certificate that fails
verification is the provider's ``certificate_error`` (which says what to trust). Failures are errors of the
taxonomy naming the endpoint, never the password or the session id: a refused login is
Unauthorized, an endpoint without the API (an ESXi host) NotSupported, a session that expired
Unavailable (the next call logs in again).
"""
from ansible_collections.resilient.virt.plugins.module_utils.errors import (
    Conflict, NotSupported, Timeout, Unauthorized, Unavailable, VirtError, classify,
    classify_http)

__all__ = ("TagClient", "SESSION_HEADER")

SESSION_HEADER = "vmware-api-session-id"
_ALREADY_EXISTS = "com.vmware.vapi.std.errors.already_exists"
_VM = "VirtualMachine"


def _http_session(ssl_context, verify):
    """A requests.Session trusting only ``ssl_context`` (https) and nothing from the environment."""
    import requests
    from requests.adapters import HTTPAdapter

    class ContextAdapter(HTTPAdapter):
        """Verifies with the provider's SSL context instead of requests' CA bundle."""

        def init_poolmanager(self, *args, **kwargs):
            kwargs["ssl_context"] = ssl_context
            super().init_poolmanager(*args, **kwargs)

        def cert_verify(self, conn, url, verify, cert):
            super().cert_verify(conn, url, verify, cert)
            conn.ca_certs = conn.ca_cert_dir = None  # the context's trust only

    session = requests.Session()
    session.trust_env = False
    session.verify = verify
    if ssl_context is not None:
        session.mount("https://", ContextAdapter())
    return session


def _vapi_error(response):
    """(vAPI error type, its messages joined) of a failed response; ("", "") when it has none."""
    try:
        body = response.json()
    except ValueError:
        return "", ""
    if not isinstance(body, dict):
        return "", ""
    value = body.get("value") if isinstance(body.get("value"), dict) else {}
    messages = [m.get("default_message") for m in value.get("messages") or []
                if isinstance(m, dict) and m.get("default_message")]
    return str(body.get("type") or value.get("error_type") or ""), "; ".join(messages)


class TagClient:
    """A logged-in REST session of the vCenter ``config`` names, for the tags of its
    ``tag_category``. ``scrub(text)`` removes the provider's secrets from text;
    ``certificate_error(exc, where)`` is the error of a server certificate that failed
    verification, else None."""

    def __init__(self, config, ssl_context, scrub, certificate_error):
        self._base = "%s://%s:%d/rest/com/vmware/cis" % (config["protocol"], config["host"],
                                                         config["port"])
        self._where = "the vSphere REST API of %s:%d" % (config["host"], config["port"])
        self._timeout = config["timeout"]
        self._category_name = config["tag_category"]
        self._scrub = scrub
        self._certificate_error = certificate_error
        self._session_id = None
        self._category = None  # id of the category, once found
        self._looked = False  # whether the category was looked for
        self._names = {}  # tag id -> name, for the tags of the category
        self._foreign = set()  # ids of tags of other categories
        self._http = _http_session(ssl_context, config["validate_certs"])
        self._login(config["username"], config["password"])

    # -- requests -----------------------------------------------------------------------------
    def _text(self, text):
        text = self._scrub(str(text))
        return text.replace(self._session_id, "(session id)") if self._session_id else text

    def _send(self, method, path, action=None, body=None, **kwargs):
        """The response to one request, or the VirtError of a failure to get one."""
        import requests

        url = self._base + path + ("?~action=" + action if action else "")
        try:
            return self._http.request(method, url, json=body, timeout=self._timeout, **kwargs)
        except requests.RequestException as exc:
            err = self._certificate_error(exc, self._where)
            if err is not None:
                raise err from None
            err = classify(exc)
            if isinstance(err, Timeout):
                err.message = "%s did not answer within %gs" % (self._where, self._timeout)
            else:
                err.message = self._text("%s: %s" % (self._where, err.message))
            err.args = (err.message,)
            raise err from None

    def _value(self, response, what):
        """The ``value`` of a successful response; the error of a failed one."""
        if response.ok:
            try:
                body = response.json() if response.content else {}
            except ValueError:
                body = None
            if not isinstance(body, dict):
                raise Unavailable("%s answered %s with HTTP %d and a body that is not a vAPI "
                                  "JSON answer" % (self._where, what, response.status_code))
            return body.get("value")
        kind, messages = _vapi_error(response)
        detail = self._text(": ".join(part for part in (kind, messages) if part))
        if response.status_code == 401:
            self._session_id = None
            raise Unavailable("the session with %s ended (it expired or the server restarted) "
                              "while %s; the next call logs in again" % (self._where, what),
                              details={"status": 401})
        if response.status_code == 403:
            raise Unauthorized("%s refused %s (HTTP 403%s); give provider.username a role with "
                               "the vSphere tagging privileges" % (self._where, what,
                                                                   ": " + detail if detail else ""),
                               details={"status": 403})
        err = classify_http(response.status_code, response.headers,
                            "%s refused %s%s" % (self._where, what, ": " + detail if detail else ""))
        err.details["vapi_error"] = kind or None
        raise err

    def _call(self, method, path, what, action=None, body=None):
        if self._session_id is None:
            raise Unavailable("the session with %s ended; the next call logs in again"
                              % self._where)
        response = self._send(method, path, action, body,
                              headers={SESSION_HEADER: self._session_id})
        return self._value(response, what)

    def _login(self, username, password):
        response = self._send("POST", "/session", auth=(username, password),
                              headers={"vmware-use-header-authn": "true"})
        if response.status_code in (401, 403):
            raise Unauthorized("%s refused the login of provider.username (HTTP %d); check "
                               "provider.username and provider.password"
                               % (self._where, response.status_code),
                               details={"status": response.status_code})
        if response.status_code == 404:
            raise NotSupported("%s answered HTTP 404: the endpoint serves no vSphere Automation "
                               "API (tags need vCenter; an ESXi host has none); point "
                               "provider.host at a vCenter or remove tags" % self._where,
                               details={"status": 404})
        session_id = self._value(response, "the login")
        if not isinstance(session_id, str) or not session_id:
            raise Unavailable("%s answered the login without a session id" % self._where)
        self._session_id = session_id

    @property
    def alive(self):
        """False once the session ended (logged out, or expired on the server)."""
        return self._session_id is not None

    def close(self):
        """Log out (best effort) and close the connections."""
        try:
            if self._session_id is not None:
                self._send("DELETE", "/session", headers={SESSION_HEADER: self._session_id})
        except VirtError:
            pass
        finally:
            self._session_id = None
            self._http.close()

    # -- category and tags --------------------------------------------------------------------
    def _find_category(self):
        for category_id in self._call("GET", "/tagging/category", "listing tag categories") or []:
            info = self._call("GET", "/tagging/category/id:%s" % category_id,
                              "reading a tag category") or {}
            if info.get("name") == self._category_name:
                return category_id
        return None

    def category(self, create):
        """Id of the category (created when ``create`` and missing), or None; a category
        missing is looked for again only to create it."""
        if self._category is None and (create or not self._looked):
            self._category = self._find_category()
            self._looked = True
        if self._category is None and create:
            spec = {"name": self._category_name, "cardinality": "MULTIPLE",
                    "associable_types": [_VM],
                    "description": "Tags of VMs managed by resilient.virt"}
            try:
                self._category = self._call("POST", "/tagging/category", "creating the tag "
                                            "category %r" % self._category_name,
                                            body={"create_spec": spec})
            except VirtError as err:  # created meanwhile by another task
                if (err.details or {}).get("vapi_error") != _ALREADY_EXISTS:
                    raise
                self._category = self._find_category()
        return self._category

    def _refresh_names(self):
        """Learn the tags of the category (names of new ones by one GET each)."""
        ids = self._call("POST", "/tagging/tag/id:%s" % self._category, "listing the tags of "
                         "category %r" % self._category_name,
                         action="list-tags-for-category") or []
        self._names = dict((i, self._names[i]) for i in ids if i in self._names)
        for tag_id in ids:
            if tag_id not in self._names:
                info = self._call("GET", "/tagging/tag/id:%s" % tag_id, "reading a tag") or {}
                self._names[tag_id] = info.get("name")

    def _attached_ids(self, moids):
        """{moid: [ids of every tag attached]} in one request."""
        body = {"object_ids": [{"type": _VM, "id": moid} for moid in moids]}
        found = self._call("POST", "/tagging/tag-association", "listing the tags of VMs",
                           action="list-attached-tags-on-objects", body=body) or []
        out = dict((moid, []) for moid in moids)
        for item in found:
            moid = (item.get("object_id") or {}).get("id")
            if moid in out:
                out[moid] = list(item.get("tag_ids") or [])
        return out

    def tags_of(self, moids):
        """{moid: sorted names of the category's tags on that VM} for VM moIds ``moids``."""
        moids = list(moids)
        if not moids or self.category(create=False) is None:
            return dict((moid, []) for moid in moids)
        attached = self._attached_ids(moids)
        seen = set(i for ids in attached.values() for i in ids)
        if seen - set(self._names) - self._foreign:
            self._refresh_names()
            self._foreign |= seen - set(self._names)
        return dict((moid, sorted(self._names[i] for i in ids if i in self._names))
                    for moid, ids in attached.items())

    def _tag_id(self, name):
        """Id of the category's tag ``name``, created when missing."""
        for tag_id, known in self._names.items():
            if known == name:
                return tag_id
        spec = {"name": name, "category_id": self._category, "description": ""}
        try:
            tag_id = self._call("POST", "/tagging/tag", "creating tag %r" % name,
                                body={"create_spec": spec})
        except VirtError as err:  # created meanwhile by another task
            if (err.details or {}).get("vapi_error") != _ALREADY_EXISTS:
                raise
            self._refresh_names()
            found = [i for i, known in self._names.items() if known == name]
            if not found:
                raise Conflict("%s says tag %r exists in category %r, but does not list it; "
                               "try again" % (self._where, name, self._category_name)) from err
            return found[0]
        self._names[tag_id] = name
        return tag_id

    def _batch(self, action, moid, tag_ids, what):
        body = {"object_id": {"type": _VM, "id": moid}, "tag_ids": tag_ids}
        result = self._call("POST", "/tagging/tag-association", what, action=action, body=body)
        if isinstance(result, dict) and result.get("success") is False:
            errors = "; ".join(str(e.get("default_message") or e.get("message") or e)
                               for e in result.get("error_messages") or [])
            raise Unavailable(self._text("%s failed %s: %s" % (self._where, what, errors)))

    def set_tags(self, moid, names):
        """Make the category's tags on VM ``moid`` exactly ``names``; True when that changed
        anything. Missing tags are created in the category."""
        self.category(create=True)
        self._refresh_names()
        attached = [i for i in self._attached_ids([moid])[moid] if i in self._names]
        current, wanted = set(self._names[i] for i in attached), set(names)
        if current == wanted:
            return False
        add = [self._tag_id(name) for name in sorted(wanted - current)]
        drop = [i for i in attached if self._names[i] not in wanted]
        if add:
            self._batch("attach-multiple-tags-to-object", moid, add, "attaching tags to a VM")
        if drop:
            self._batch("detach-multiple-tags-from-object", moid, drop, "detaching tags from a VM")
        return True
