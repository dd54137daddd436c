"""What the files of the libvirt backend get from the provider for one call."""

__all__ = ("Session",)


class Session:
    """One call's access to a libvirt host, made by ``LibvirtProvider.session()``:
    ``provider`` (its ``key``, ``config``, ``warnings``, ``option_path``, ``check_name``),
    ``connection`` (the libvirt connection), ``lookup(name)`` (the domain named ``name``, or
    NotFound), ``describe(dom)`` (the VM dict of a domain) and ``platform()`` ((domain type, its
    warning or None, CPU modes or None) that the host offers new domains, read once per
    provider). The provider gives its own functions for the last three, each taking the
    connection first."""

    def __init__(self, provider, connection, lookup, describe, platform):
        self.provider = provider
        self.connection = connection
        self._lookup = lookup
        self._describe = describe
        self._platform = platform

    def lookup(self, name):
        return self._lookup(self.connection, name)

    def describe(self, dom):
        return self._describe(self.connection, dom)

    def platform(self):
        return self._platform(self.connection)
