"""A REST session of the test's own on the vSphere simulator's Automation API: the oracle of
the tags it holds, read without the collection's code."""
import requests

CIS = "/rest/com/vmware/cis"


def base_url(settings):
    """``<protocol>://host:port/rest/com/vmware/cis`` of the simulator of ``settings``."""
    return "%s://%s:%d%s" % (settings["protocol"], settings["host"], settings["port"], CIS)


def verify(settings):
    """requests' ``verify`` for the simulator: its ``ca_path`` (the lab CA) over https."""
    return settings["ca_path"] if settings["protocol"] == "https" else True


class Rest:
    """The test's own REST session: the oracle of what the simulator holds."""

    def __init__(self, settings):
        self.base = base_url(settings)
        self.http = requests.Session()
        self.http.trust_env = False
        self.http.verify = verify(settings)
        login = self.http.post(self.base + "/session",
                               auth=(settings["username"], settings["password"]))
        login.raise_for_status()
        self.http.headers["vmware-api-session-id"] = login.json()["value"]

    def call(self, method, path, action=None, body=None):
        response = self.http.request(method, self.base + path + (
            "?~action=" + action if action else ""), json=body)
        response.raise_for_status()
        return response.json().get("value") if response.content else None

    def categories(self):
        """{name: category dict}."""
        found = [self.call("GET", "/tagging/category/id:" + i)
                 for i in self.call("GET", "/tagging/category") or []]
        return dict((c["name"], c) for c in found)

    def tags_on(self, moid):
        """{category name: sorted tag names} attached to VM ``moid`` (one by one, not batched)."""
        ids = self.call("POST", "/tagging/tag-association", "list-attached-tags",
                        {"object_id": {"type": "VirtualMachine", "id": moid}}) or []
        names = dict((c["id"], name) for name, c in self.categories().items())
        out = {}
        for tag_id in ids:
            tag = self.call("GET", "/tagging/tag/id:" + tag_id)
            out.setdefault(names[tag["category_id"]], []).append(tag["name"])
        return dict((k, sorted(v)) for k, v in out.items())

    def create_category(self, name):
        return self.call("POST", "/tagging/category", body={"create_spec": {
            "name": name, "description": "", "cardinality": "SINGLE",
            "associable_types": []}})

    def tag(self, category_id, name, moid):
        """Create tag ``name`` in ``category_id`` and attach it to VM ``moid``."""
        tag_id = self.call("POST", "/tagging/tag", body={"create_spec": {
            "name": name, "description": "", "category_id": category_id}})
        self.call("POST", "/tagging/tag-association/id:" + tag_id, "attach",
                  {"object_id": {"type": "VirtualMachine", "id": moid}})
