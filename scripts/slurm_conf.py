"""Write one independent Slurm cluster configuration per Slurm site of a catalog.

Used by ``scripts/services.sh`` (``start_slurm``) for the tests and local development. Each
cluster gets its own directory ``<root>/<cluster>/`` with ``slurm.conf``, ``gres.conf``, a state
directory, a spool directory and fake GPU device files, and its own controller and slurmd ports:
cluster *i* (in catalog order) uses ``port_base + 10 i + 1`` (slurmctld) and ``+ 2`` (slurmd).

One node per cluster, ``<cluster>-n1``, carries every GPU of the site (a gang must fit on one node
because ``--gres`` counts per node). GPUs are declared in ``gres.conf`` with ``AutoDetect=off``
against character devices the caller creates with ``mknod c 1 3`` (the null device): Slurm
only needs a file to bind, never a real GPU.

Prints one line per cluster: ``<cluster> <dir> <node> <ctld_port> <slurmd_port> <devices...>``.

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
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd.log
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
NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={slurmd_port} CPUs={cpus} \
RealMemory={memory_mb} Gres={gres} State=UNKNOWN
PartitionName={partition} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""


def write_cluster(root: Path, cluster: str, site_id: str, catalog: str,
                  gpus: dict[str, int], ctld_port: int, slurmd_port: int, munge_socket: str,
                  partition: str = "gpu",
                  message_timeout_s: int = 10) -> tuple[Path, str, list[str]]:
    """Write ``<root>/<cluster>/{slurm.conf,gres.conf}`` and its folders.

    Returns
    -------
    (dir, node, devices)
        The cluster's folder, its node name and the device files to create with ``mknod``.
    """
    d = root / cluster
    for sub in ("state", "spool", "tmp", "dev"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    node = f"{cluster}-n1"
    gres, lines, devices, k = [], ["AutoDetect=off"], [], 0
    for gpu_type, count in gpus.items():
        gres.append(f"gpu:{gpu_type}:{count}")
        devices += [str(d / "dev" / f"gpu{k + j}") for j in range(count)]
        lines.append(f"NodeName={node} Name=gpu Type={gpu_type} "
                     f"File={d / 'dev'}/gpu[{k}-{k + count - 1}]")
        k += count
    (d / "slurm.conf").write_text(SLURM_CONF.format(
        site=site_id, catalog=catalog, cluster=cluster, host=socket.gethostname(),
        ctld_port=ctld_port, slurmd_port=slurmd_port, munge_socket=munge_socket, dir=d,
        node=node, cpus=max(64, sum(gpus.values()) * 4), memory_mb=512000,
        gres=",".join(gres), partition=partition, message_timeout_s=message_timeout_s))
    (d / "gres.conf").write_text("\n".join(lines) + "\n")
    return d, node, devices


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
        d, node, devices = write_cluster(
            args.root, cluster, site.id, cat.name, {t: p.count for t, p in site.gpus.items()},
            ctld_port, slurmd_port, args.munge_socket, site.backend.partition or "gpu")
        print(cluster, d, node, ctld_port, slurmd_port, *devices)
        i += 1
    os.sync()


if __name__ == "__main__":
    main()
