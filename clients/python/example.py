#!/usr/bin/env python3
"""Runs a command on a paired provider, streaming its output, then brings the
files it wrote home.

    python3 example.py PROVIDER IMAGE [COMMAND ...]
    python3 example.py studio pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime \
        python -c "import torch; print(torch.cuda.get_device_name())"
"""
import os
import sys

from yonder_client import YonderClient, YonderError


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    peer, image, command = argv[1], argv[2], argv[3:] or ["nvidia-smi"]
    y = YonderClient()
    print("node %s, %d paired peer(s)" % (y.status()["node_id"], len(y.peers())), file=sys.stderr)
    job = y.run(peer, image, command, gpus=1, upload_dir=os.getcwd())
    print("job %s %s, exit code %s" % (job["job_id"], job["state"], job.get("exit_code")), file=sys.stderr)
    y.outputs(job["job_id"], os.getcwd())
    return job.get("exit_code") or 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except YonderError as e:
        sys.stderr.write("example: %s\n" % e)
        sys.exit(1)
