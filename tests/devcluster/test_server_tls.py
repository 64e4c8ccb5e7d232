"""TLS: a fresh CA per start, the serving certificate names the SANs clients connect with."""

from __future__ import annotations

import ssl

import aiohttp
import pytest

from devkube.server import ApiServer
from tests.harness.cluster import client_ssl_context


async def test_certificate_covers_extra_sans_and_nothing_else() -> None:
    server = ApiServer(extra_sans=["apiserver.devcluster.local"], token="fixed")
    await server.start()
    try:
        assert server.token == "fixed"
        assert server.kubeconfig_dict("x")["users"][0]["user"]["token"] == "fixed"
        ctx = client_ssl_context(server)
        async with aiohttp.ClientSession() as session:
            for name in ("apiserver.devcluster.local", "localhost", "kubernetes.default.svc"):
                async with session.get(
                    server.url + "/healthz", ssl=ctx, server_hostname=name
                ) as resp:
                    assert resp.status == 200
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(
                    server.url + "/healthz", ssl=ctx, server_hostname="elsewhere.example"
                )
            with pytest.raises(aiohttp.ClientConnectorCertificateError):
                await session.get(server.url + "/healthz", ssl=ssl.create_default_context())
            with pytest.raises(aiohttp.ClientError):
                await session.get(server.url.replace("https://", "http://") + "/healthz")
    finally:
        await server.stop()


async def test_each_start_mints_a_new_ca() -> None:
    first, second = ApiServer(), ApiServer()
    await first.start()
    await second.start()
    try:
        assert first.ca_pem.startswith(b"-----BEGIN CERTIFICATE-----")
        assert first.ca_pem != second.ca_pem and first.token != second.token
        assert first.port != second.port
    finally:
        await first.stop()
        await second.stop()
