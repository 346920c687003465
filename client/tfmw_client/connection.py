"""What the official REST client (`kubernetes.client.rest.RESTClientObject`) reads of a
`Configuration`, for the kubeconfigs tfmw reads itself (tfmw_client.kubeconfig).

Why not the official `Configuration`: its module imports `multiprocessing` (for a CPU
count), `urllib.request` (for the proxies of the environment) and the logging set-up of a
generated client, which `tfmw get` paid for at every start and never used
(docs/benchmarks.md, "The CLI's start time"). The REST client, the transport, is the
official one all the same; a Configuration is still what the official loader fills for an
`exec` plugin, an auth provider, basic auth or a pod's service account (tfmw_client.kube).

The defaults and the proxy rules are the official Configuration's (kubernetes 37): the
proxy of the host's scheme from the environment (else `all_proxy`), re-read when the host
is set, unless a proxy was set; `no_proxy` from the environment; `cpu_count() * 5`
connections. tests/unit/client/test_kubeconfig.py checks that the REST client gets the same
pool manager from either, with and without proxies in the environment.
"""

from __future__ import annotations

import os
import sys
from urllib.parse import urlparse


def environment_proxies() -> dict[str, str]:
    """`urllib.request.getproxies()`, imported only when it may find one: on Linux it reads
    the environment's `*_proxy` variables alone, so none there means none."""
    if sys.platform.startswith("linux") and not any(name.lower().endswith("_proxy") for name in os.environ):
        return {}
    from urllib.request import getproxies

    return getproxies()


class Connection:
    """A server, its TLS settings and a bearer token, as the official REST client reads them."""

    def __init__(self) -> None:
        self._host = "http://localhost"
        self.api_key: dict[str, str] = {}
        self.verify_ssl = True
        self.ssl_ca_cert: str | None = None
        self.ca_cert_data: str | None = None
        self.cert_file: str | None = None
        self.key_file: str | None = None
        self.assert_hostname: bool | None = None
        self.tls_server_name: str | None = None
        self.retries: object = None
        self.socket_options: object = None
        self.keep_alive = False
        self.client_go_retries = False
        self.connection_pool_maxsize = (os.cpu_count() or 1) * 5
        proxies = environment_proxies()
        self._proxies = proxies
        self._proxy_from_env = True
        self._proxy = self._env_proxy(self._host)
        self.no_proxy: str | None = proxies.get("no")
        self.proxy_headers: dict[str, str] | None = None
        self.proxy_ssl_context: object = None

    def _env_proxy(self, host: str) -> str | None:
        return self._proxies.get(urlparse(host).scheme) or self._proxies.get("all")

    @property
    def host(self) -> str:
        return self._host

    @host.setter
    def host(self, value: str) -> None:
        self._host = value
        if self._proxy_from_env:
            self._proxy = self._env_proxy(value)

    @property
    def proxy(self) -> str | None:
        return self._proxy

    @proxy.setter
    def proxy(self, value: str | None) -> None:
        self._proxy = value
        self._proxy_from_env = False

    def auth_settings(self) -> dict[str, dict[str, str]]:
        """The header of the bearer token, as the official `Configuration.auth_settings()`."""
        token = self.api_key.get("BearerToken") or self.api_key.get("authorization")
        if not token:
            return {}
        return {"BearerToken": {"type": "api_key", "in": "header", "key": "authorization", "value": token}}
