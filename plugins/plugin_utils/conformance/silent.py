# Copyright: resilient.virt contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An endpoint that accepts connections and never answers: a hung server, for timeout tests."""
from __future__ import annotations

import socket
import threading
from typing import Any

__all__ = ("SilentEndpoint",)


class SilentEndpoint:
    """Listens on ``address`` and accepts every connection without ever reading or answering.

    ``address``: a path (a unix socket, such as a hung libvirtd's) or ``(host, port)`` (TCP;
    port 0 picks a free one). :attr:`address` is where it listens. Closing it closes the
    connections it accepted, so a call still waiting on one then fails instead of hanging.
    """

    def __init__(self, address: str | tuple[str, int] = ("127.0.0.1", 0)):
        family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
        self._socket = socket.socket(family)
        self._socket.bind(address)
        self._socket.listen(16)
        self.address: Any = self._socket.getsockname()
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.accepted.append(self._socket.accept()[0])
            except OSError:  # closed
                return

    def close(self) -> None:
        for conn in self.accepted:
            conn.close()
        try:
            self._socket.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        except OSError:
            pass
        self._socket.close()

    def __enter__(self) -> SilentEndpoint:
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.close()
