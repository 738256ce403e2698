#!/usr/bin/env bash
# Installs every external server and client the tests and benchmarks use
# (Debian 12, as root). Safe to re-run: it skips what is already there.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

apt_pkgs=(
  xrootd-server xrootd-client xrootd-plugins
  nginx libnginx-mod-http-dav-ext
  litmus davix rclone curl
  gfal2 python3-gfal2 python3-gfal2-util gfal2-util-scripts python-is-python3
  gfal2-plugin-http gfal2-plugin-file gfal2-plugin-xrootd
  wrk apache2-utils chromium chromium-driver attr openssl
  redis-server postgresql
  # voms-proxy-fake makes the VOMS proxies the auth tests present
  voms-clients
  # promtool checks deploy/prometheus's rules; a real prometheus runs them against a lake
  prometheus
  # the nemesis and the partition tests cut processes off in network namespaces (ip netns)
  iproute2
  # systemd-analyze verify and security check deploy/systemd's units; make runs make install
  systemd make
  # bench/xroot.sh PACED=1 builds the CMS AAA scale test's XrdCl client
  g++ libxrootd-client-dev libpcre3-dev
)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# xrootd is the XRootD Python bindings (XRootD.client, readv) as a wheel,
# for whichever python3 is first on PATH (Debian's python3-xrootd serves
# /usr/bin/python3 only); fsspec-xrootd lets uproot open root:// URLs.
py_pkgs=(uproot awkward numpy fsspec aiohttp requests xrootd fsspec-xrootd)
python3 -c "import uproot, awkward, numpy, fsspec, aiohttp, requests, XRootD.client, fsspec_xrootd" 2>/dev/null || python3 -m pip install -q "${py_pkgs[@]}"

# s3proxy (Maven Central), the real S3 server the s3 kind is tested against:
# it checks signatures and expiry of pre-signed URLs, which moto does not.
S3PROXY_VERSION=2.6.0
jar_dir="${HOME}/.cache/lakefed-s3proxy"
if [ ! -f "$jar_dir/s3proxy-$S3PROXY_VERSION-jar-with-dependencies.jar" ]; then
  command -v java >/dev/null && command -v mvn >/dev/null || {
    SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq --no-install-recommends default-jre-headless maven
  }
  mvn -B -q dependency:copy -Dartifact="org.gaul:s3proxy:$S3PROXY_VERSION:jar:jar-with-dependencies" \
    -DoutputDirectory="$jar_dir"
fi

go mod download
