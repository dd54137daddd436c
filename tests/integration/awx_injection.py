"""A STAND-IN for AWX's injection of a custom credential (AWX cannot run here).

:func:`inject` does what AWX's ``CredentialType.inject_credential`` does with a credential type's
``injectors`` (read in AWX's source, awx/main/models/credential.py): the namespace holds the
inputs that are set and not empty (booleans always, a missing one False), an ``ssh_private_key``
field gets a final newline; the ``file`` templates are rendered into files (mode 0600) of
``<private_data_dir>/env``, named to the other templates as ``tower.filename`` (label
``template``) or ``tower.filename.<name>`` (label ``template.<name>``); then the ``env`` templates
are rendered. Everything renders in Jinja's ImmutableSandboxedEnvironment with Jinja's own
filters only, as AWX does (no Ansible filters). Paths are those of this machine: AWX maps them to
``/runner/env/...`` inside the job's container.
"""
import os
import tempfile
from types import SimpleNamespace

__all__ = ("inject", "load_credential_type", "CREDENTIAL_TYPES")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CREDENTIAL_TYPES = os.path.join(ROOT, "extensions", "awx", "credential_types")


def load_credential_type(name):
    """The credential type of ``extensions/awx/credential_types/<name>.yml`` (a dict)."""
    import yaml

    with open(os.path.join(CREDENTIAL_TYPES, name + ".yml")) as handle:
        return yaml.safe_load(handle)


def inject(credential_type, inputs, private_data_dir):
    """The environment variables AWX injects for a credential of ``credential_type`` holding
    ``inputs``; its files are written under ``private_data_dir``/env."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    namespace = {}
    for name, value in inputs.items():
        if isinstance(value, bool) or (value is not None and len(value)):
            namespace[name] = value
    for field in credential_type["inputs"].get("fields", []):
        if field.get("type") == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = False
        if field.get("format") == "ssh_private_key" and field["id"] in namespace \
                and not namespace[field["id"]].endswith("\n"):
            namespace[field["id"]] += "\n"
    jinja = ImmutableSandboxedEnvironment()
    tower = SimpleNamespace()
    namespace["tower"] = tower
    env_dir = os.path.join(private_data_dir, "env")
    os.makedirs(env_dir, exist_ok=True)
    for label, template in credential_type["injectors"].get("file", {}).items():
        data = jinja.from_string(template).render(**namespace)
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(data)
        os.chmod(path, 0o600)
        if "." not in label:
            tower.filename = path
        else:
            if not hasattr(tower, "filename"):
                tower.filename = SimpleNamespace()
            setattr(tower.filename, label.split(".", 1)[1], path)
    return dict((name, jinja.from_string(template).render(**namespace))
                for name, template in credential_type["injectors"].get("env", {}).items())
