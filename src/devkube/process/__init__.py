"""The process runtime: pods of the dev cluster as real local processes.

`DevCluster(runtime="process")` (or `raycluster-operator dev --runtime process`) keeps the
simulated kubelet for pod IPs, status, restart decisions and graceful deletion, and runs each
pod's containers here instead: command + args (the image is ignored) with the host's
environment plus the container's, this interpreter's bin directory first on PATH. Each pod gets
a mount, PID and UTS namespace (`unshare`, root only) whose PID 1 is `podinit.py`, so deleting
the pod kills every process it started; a loopback pod IP (nodes get 127.1.<n>.0/24 ranges);
an /etc/hosts standing in for cluster DNS (services, headless pod names); /etc/hostname; a token
of the pod's own ServiceAccount (TokenRequest, bound to the pod; see
`devkube.kubelet.podtokens`), the CA and the namespace at
/var/run/secrets/kubernetes.io/serviceaccount;
KUBERNETES_SERVICE_* pointing at the dev API server; a private /tmp; probes; logs for
`kubectl logs`. It runs commands and knows nothing of what they are.

Known limits (one network namespace for all pods): a server bound to the wildcard address
takes its port for every pod; programs that find "their" address by routing (Ray does, unless
given --node-ip-address) see the host's address or 127.0.0.1 rather than the pod IP; service
ports are not translated (a ClusterIP name resolves to an endpoint pod, so the service port
must equal the target port); /dev/shm is the host's.
"""

from __future__ import annotations

from devkube.process.sandbox import process_runtime_available

__all__ = ["process_runtime_available"]
