"""Domains on lab hypervisors, made and removed through libvirt-python directly (not the collection)."""
import libvirt


def remove_domain(uri, name):
    """Stop and undefine domain ``name`` on ``uri`` if it is there; a gone domain is fine."""
    conn = libvirt.open(uri)
    try:
        dom = conn.lookupByName(name)
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    except libvirt.libvirtError as err:
        if err.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
            raise
    finally:
        conn.close()
