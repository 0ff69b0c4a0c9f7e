"""CuttableLink: a TCP relay on 127.0.0.1 between one replica and the fake API, so a test can cut that replica's
connection alone (the other replica keeps talking to the same server).

``cut()`` drops open connections and refuses new ones (connection reset); ``hang()`` accepts connections and
never answers (the client's request timeout must fire); ``restore()`` relays again.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading


class CuttableLink:
    def __init__(self, target_port: int) -> None:
        self._target = ("127.0.0.1", target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._mode = "open"
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name=f"link-{self.port}", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._set("cut")

    def hang(self) -> None:
        self._set("hang")

    def restore(self) -> None:
        self._set("open")

    def close(self) -> None:
        self._closing.set()
        self._set("cut")
        self._thread.join(timeout=2)
        self._listener.close()

    def _set(self, mode: str) -> None:
        with self._lock:
            self._mode = mode
            doomed = list(self._sockets)
            self._sockets.clear()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self._lock:
                mode = self._mode
                self._sockets.add(client)
            if mode == "cut":
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # reset, not FIN
                client.close()
            elif mode == "open":
                threading.Thread(target=self._relay, args=(client,), daemon=True).start()
            # "hang": keep the socket open and silent until the mode changes

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self._target, timeout=2)
        except OSError:
            client.close()
            return
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._sockets.add(upstream)
        pair = {client: upstream, upstream: client}
        try:
            while True:
                readable, _, _ = select.select(list(pair), [], [], 0.1)
                if self._closing.is_set():
                    return
                for sock in readable:
                    data = sock.recv(65536)
                    if not data:
                        return
                    pair[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for sock in pair:
                with contextlib.suppress(OSError):
                    sock.close()
