#!/bin/sh
# Installs what building and testing ofi_layer needs on Debian (run as root or with sudo):
# iproute2 and nftables make the loss and partition tests (run_loss.sh) in a network
# namespace of their own.
set -e
SUDO=
[ "$(id -u)" -eq 0 ] || SUDO=sudo
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	build-essential autoconf automake libtool pkg-config \
	libfabric-dev libfabric-bin uthash-dev libcmocka-dev valgrind \
	openmpi-bin libopenmpi-dev iproute2 nftables >/dev/null
