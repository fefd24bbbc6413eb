#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""A FUSE file system that never answers: `hangfs.py MOUNTPOINT` mounts it (as root, allow_other), answers
the kernel's INIT and then reads every request and answers none, so any lookup below MOUNTPOINT blocks the
caller in the kernel (a task in a FUSE request that the server has read waits uninterruptibly). Prints
"ready" once mounted. Killing this process closes /dev/fuse, which aborts the connection: every waiting
request then fails and killed waiters die. Speaks the raw /dev/fuse protocol, so it needs no libfuse."""
import ctypes
import os
import struct
import sys

FUSE_INIT = 26
MS_NOSUID, MS_NODEV = 2, 4


def main():
    mnt = sys.argv[1]
    fd = os.open("/dev/fuse", os.O_RDWR)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"rtdtest-hangfs", mnt.encode(), b"fuse.rtdtest-hangfs", MS_NOSUID | MS_NODEV, opts) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), mnt)
    while True:
        req = os.read(fd, 1 << 20)
        _length, opcode, unique = struct.unpack_from("<IIQ", req)
        if opcode != FUSE_INIT:
            continue    # never answered: the caller waits until this process dies
        major, minor = struct.unpack_from("<II", req, 40)
        # fuse_init_out: major, minor, max_readahead, flags, max_background, congestion_threshold, max_write,
        # time_gran, max_pages, map_alignment, flags2, unused[7]
        body = struct.pack("<IIIIHHIIHHI28x", 7, min(minor, 31), 0, 0, 16, 12, 65536, 1, 16, 0, 0)
        os.write(fd, struct.pack("<IiQ", 16 + len(body), 0, unique) + body)
        print("ready", flush=True)


if __name__ == "__main__":
    main()
