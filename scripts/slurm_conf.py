"""Write one independent Slurm cluster configuration per Slurm site of a catalog.

Used by ``scripts/services.sh`` (``start_slurm``) for the tests and local development. Each
cluster gets its own directory ``<root>/<cluster>/`` with ``slurm.conf``, ``gres.conf``, a state
directory, a spool directory and fake GPU device files, and its own controller and slurmd ports:
cluster *i* (in catalog order) uses ``port_base + 10 i + 1`` (slurmctld) and ``+ 2`` (slurmd).

Nodes follow the catalog's node shapes (``gpus_per_node`` of each GPU pool, issue 33): a pool of
``count`` GPUs with ``gpus_per_node = G`` becomes ``count / G`` nodes of ``G`` GPUs of that type,
named ``<cluster>-n1``, ``-n2``, ... in catalog order (a pool without a shape is one node), so
the total GPUs equal the catalog's count and a multi-node gang (``--nodes N --gres`` per node)
runs on real distinct nodes. Every node has its own ``slurmd`` (``slurmd -N <node>``) on its own
port: node *k* (from 0) listens on ``slurmd_port + k``; with ``%n`` in ``SlurmdSpoolDir`` and
``SlurmdPidFile`` each daemon keeps its own spool and pid file, as Slurm's multiple-slurmd mode
needs. Test-owned private clusters (``write_cluster`` without ``gpus_per_node``) keep one node,
``<cluster>-n1``, carrying every GPU. GPUs are declared in ``gres.conf`` with ``AutoDetect=off``
against character devices the caller creates with ``mknod c 1 3`` (the null device), one folder
of them per node: Slurm only needs a file to bind, never a real GPU. CPUs are declared (8 per
GPU, at least 64; ``SlurmdParameters=config_overrides`` lets a 2-core host run them) with a small
``RealMemory``.

Prints one line per cluster: ``<cluster> <dir> <node,node,...> <ctld_port> <slurmd_port>
<devices...>``.

Source of every keyword: slurm.conf(5) and gres.conf(5) of Slurm 22.05.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from carbonsched.catalog import load_catalog

SLURM_CONF = """\
# written by scripts/slurm_conf.py for site {site} (catalog {catalog}); see slurm.conf(5)
ClusterName={cluster}
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge_socket}
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool{node_suffix}
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd{node_suffix}.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd{node_suffix}.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
# completed jobs stay visible to squeue/scontrol for a day (no slurmdbd here)
MinJobAge=86400
MaxJobCount=200000
MaxArraySize=100001
ReturnToService=2
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={dir}/jobcomp.txt
JobAcctGatherType=jobacct_gather/none
SlurmctldTimeout=30
SlurmdTimeout=60
MessageTimeout={message_timeout_s}
TmpFS={dir}/tmp
{node_lines}
PartitionName={partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP
"""

NODE_LINE = ("NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} "
             "RealMemory={memory_mb} Gres={gres} State=UNKNOWN")


def cluster_nodes(cluster: str, gpus: dict[str, int],
                  gpus_per_node: dict[str, int | None] | None = None
                  ) -> list[tuple[str, dict[str, int]]]:
    """The nodes of a cluster and the GPUs of each: ``[(name, {type: count}), ...]``.

    Without ``gpus_per_node`` one node carries every GPU. With it, each pool of ``count`` GPUs
    whose shape ``G`` is given becomes ``count / G`` nodes of ``G`` GPUs (a pool without a shape,
    or of 0 GPUs, is one node, or none).

    Raises
    ------
    ValueError
        A pool's count is not a whole number of its nodes.
    """
    if gpus_per_node is None:
        return [(f"{cluster}-n1", dict(gpus))]
    shapes: list[dict[str, int]] = []
    for gpu_type, count in gpus.items():
        per = gpus_per_node.get(gpu_type) or count
        if count == 0:
            continue
        if count % per:
            raise ValueError(f"{cluster}: {count} {gpu_type} is not whole nodes of {per}")
        shapes += [{gpu_type: per} for _ in range(count // per)]
    return [(f"{cluster}-n{k + 1}", g) for k, g in enumerate(shapes)]


def write_cluster(root: Path, cluster: str, site_id: str, catalog: str,
                  gpus: dict[str, int], ctld_port: int, slurmd_port: int, munge_socket: str,
                  partition: str = "gpu", message_timeout_s: int = 10,
                  gpus_per_node: dict[str, int | None] | None = None
                  ) -> tuple[Path, str, list[str]]:
    """Write ``<root>/<cluster>/{slurm.conf,gres.conf}`` and its folders.

    Parameters
    ----------
    gpus
        GPUs per type at the site. [-]
    slurmd_port
        The first node's slurmd port; node *k* (from 0) listens on ``slurmd_port + k``.
    gpus_per_node
        The node shape per GPU type (the catalog's ``gpus_per_node``); ``None``: one node.

    Returns
    -------
    (dir, nodes, devices)
        The cluster's folder, its node names (comma-separated; one name for a one-node
        cluster) and the device files to create with ``mknod``.
    """
    d = root / cluster
    for sub in ("state", "spool", "tmp", "dev"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    nodes = cluster_nodes(cluster, gpus, gpus_per_node)
    many = len(nodes) > 1
    lines, devices, node_lines = ["AutoDetect=off"], [], []
    for k, (node, node_gpus) in enumerate(nodes):
        dev = d / "dev" / node if many else d / "dev"
        dev.mkdir(parents=True, exist_ok=True)
        if many:
            (d / f"spool-{node}").mkdir(exist_ok=True)
        gres, first = [], 0
        for gpu_type, count in node_gpus.items():
            gres.append(f"gpu:{gpu_type}:{count}")
            devices += [str(dev / f"gpu{first + j}") for j in range(count)]
            lines.append(f"NodeName={node} Name=gpu Type={gpu_type} "
                         f"File={dev}/gpu[{first}-{first + count - 1}]")
            first += count
        node_lines.append(NODE_LINE.format(
            node=node, host=socket.gethostname(), port=slurmd_port + k,
            cpus=max(64, sum(node_gpus.values()) * 8 if many else sum(node_gpus.values()) * 4),
            memory_mb=4096 if many else 512000, gres=",".join(gres)))
    (d / "slurm.conf").write_text(SLURM_CONF.format(
        site=site_id, catalog=catalog, cluster=cluster, host=socket.gethostname(),
        ctld_port=ctld_port, slurmd_port=slurmd_port, munge_socket=munge_socket, dir=d,
        node_suffix="-%n" if many else "", node_lines="\n".join(node_lines),
        nodes=",".join(n for n, _ in nodes), partition=partition,
        message_timeout_s=message_timeout_s))
    (d / "gres.conf").write_text("\n".join(lines) + "\n")
    return d, ",".join(n for n, _ in nodes), devices


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", default="global")
    ap.add_argument("--root", required=True, type=Path)
    ap.add_argument("--port-base", type=int, default=57300)
    ap.add_argument("--munge-socket", required=True)
    args = ap.parse_args()
    cat = load_catalog(args.catalog)
    i = 0
    for site in cat.sites:
        if site.backend.kind != "slurm":
            continue
        cluster = site.backend.cluster or site.id
        ctld_port = args.port_base + 10 * i + 1
        slurmd_port = args.port_base + 10 * i + 2
        d, nodes, devices = write_cluster(
            args.root, cluster, site.id, cat.name, {t: p.count for t, p in site.gpus.items()},
            ctld_port, slurmd_port, args.munge_socket, site.backend.partition or "gpu",
            gpus_per_node={t: p.gpus_per_node for t, p in site.gpus.items()})
        if len(nodes.split(",")) > 8:
            raise SystemExit(f"{cluster}: {len(nodes.split(','))} nodes do not fit the 10 ports "
                             "a cluster has (ctld +1, slurmd +2 ..); give larger gpus_per_node")
        print(cluster, d, nodes, ctld_port, slurmd_port, *devices)
        i += 1
    os.sync()


if __name__ == "__main__":
    main()
