"""exec and port-forward through k1s with the official Python client (kubernetes.stream),
and (MODE "real") a pod's log read over a websocket as upstream's conformance suite reads it.

Usage: streams_test.py KUBECONFIG POD MODE [PORT]

MODE "fake" expects the scripted kubelet of apiserver/tests/streams.rs (commands `echo`,
`fail N`, `cat`; port 80 echoes with an "echo:" prefix); MODE "real" expects a busybox pod
whose port PORT runs an echo server (`nc -lk -p PORT -e cat`).
"""

import base64
import socket
import ssl
import sys
import time

import websocket

from kubernetes import client, config
from kubernetes.stream import portforward, stream


def main():
    kubeconfig, pod, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    port = int(sys.argv[4]) if len(sys.argv) > 4 else 80
    config.load_kube_config(config_file=kubeconfig)
    api = client.CoreV1Api()

    say = ["echo", "hello", "python"] if mode == "fake" else ["sh", "-c", "echo hello python"]
    out = stream(api.connect_get_namespaced_pod_exec, pod, "default", command=say,
                 stderr=True, stdin=False, stdout=True, tty=False)
    assert out == "hello python\n", repr(out)

    fail = ["fail", "3"] if mode == "fake" else ["sh", "-c", "echo oops >&2; exit 3"]
    resp = stream(api.connect_get_namespaced_pod_exec, pod, "default", command=fail,
                  stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False)
    resp.run_forever(timeout=30)
    assert resp.returncode == 3, resp.returncode
    assert resp.read_stderr() == "oops\n"

    cat = ["cat"]
    resp = stream(api.connect_get_namespaced_pod_exec, pod, "default", command=cat,
                  stderr=True, stdin=True, stdout=True, tty=False, _preload_content=False)
    resp.write_stdin("ping\n")
    got = ""
    deadline = time.time() + 30
    while "ping\n" not in got and time.time() < deadline:
        resp.update(timeout=1)
        got += resp.read_stdout() if resp.peek_stdout() else ""
    assert got == "ping\n", repr(got)
    resp.close()

    pf = portforward(api.connect_get_namespaced_pod_portforward, pod, "default", ports=str(port))
    sock = pf.socket(port)
    sock.settimeout(30)
    sock.sendall(b"hi there\n")
    want = b"echo:hi there\n" if mode == "fake" else b"hi there\n"
    got = b""
    while len(got) < len(want):
        chunk = sock.recv(1024)
        if not chunk:
            break
        got += chunk
    assert got == want, (got, pf.error(port))
    sock.close()
    if mode == "real":
        logs_over_websocket(api, pod)
    print("all stream checks passed")


def logs_over_websocket(api, pod):
    """GET pods/POD/log upgraded to a websocket: the log's bytes in binary messages
    (`binary.k8s.io`) or base64 text (`base64.binary.k8s.io`), then a close."""
    stream(api.connect_get_namespaced_pod_exec, pod, "default",
           command=["sh", "-c", "echo from the log > /proc/1/fd/1"],
           stderr=True, stdin=False, stdout=True, tty=False)
    cfg = api.api_client.configuration
    url = cfg.host.replace("https://", "wss://") + \
        f"/api/v1/namespaces/default/pods/{pod}/log"
    sslopt = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": cfg.ssl_ca_cert,
              "certfile": cfg.cert_file, "keyfile": cfg.key_file}
    for protocol in ["binary.k8s.io", "base64.binary.k8s.io"]:
        ws = websocket.create_connection(url, sslopt=sslopt, subprotocols=[protocol],
                                         timeout=30)
        got = b""
        while True:
            try:
                opcode, data = ws.recv_data(control_frame=False)
            except websocket.WebSocketConnectionClosedException:
                break
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                break
            got += base64.b64decode(data) if protocol.startswith("base64") else data
        ws.close()
        assert b"from the log\n" in got, (protocol, got)


if __name__ == "__main__":
    main()
