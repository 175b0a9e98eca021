#!/bin/sh
# gen-secrets.sh: the files of the Secrets that kustomization.yaml makes, for
# a cluster in NAMESPACE. Run it before the first `kubectl apply -k`, and
# again to renew the certificates (docs/tls-and-tokens.md).
#
#   secrets/ca/dex-ca.pem, dex-ca-key.pem   the CA, made once (keep the key
#                                           off the cluster: --ca-dir)
#   secrets/dexd-tls/tls.crt, tls.key       the nodes' certificate
#   secrets/dexd-tls/ca.crt                 the CA bundle (also in dexworker-tls)
#   secrets/dexd-token/token                the nodes' admin token, made once
#   secrets/dexworker-tls/tls.crt, tls.key  the Workers' client certificate
#
# One node certificate serves every pod: the StatefulSet's pods share one
# pod template, so each pod mounts the same Secret and could read any other
# pod's key; one certificate per pod would only add keys to renew. It names
# each pod (dexd-N.dexd-peers, dexd-N.dexd-peers.NAMESPACE,
# ...svc, ...svc.CLUSTER_DOMAIN: raft and the nodes' own calls use the full
# name, the Workers' dex:/// target the short one), the client Service dexd
# in the same four forms, and localhost and 127.0.0.1 (dexctl adds those).
# A StatefulSet scaled beyond --replicas needs a new certificate first.
#
# Options:
#   -n, --namespace NS        the namespace (default dex)
#   -r, --replicas N          the StatefulSet's replicas (default 3)
#   -d, --cluster-domain D    the cluster's DNS domain (default cluster.local)
#   -o, --out DIR             where to write (default: secrets/ beside this script)
#       --dns NAME[,NAME]     more names for the nodes' certificate: the host
#                             of an Ingress or a load balancer that passes TLS
#                             through to the pods (repeatable)
#       --ca-dir DIR          the CA's directory (default OUT/ca); a CA is
#                             made there when it holds none
#       --also-trust FILE     add FILE's certificates to every ca.crt (a CA
#                             being replaced, while pods still use it)
#       --ca-only             rewrite only the ca.crt files, keep the certificates
# Environment: DEXCTL, the dexctl to run (default dexctl on PATH).
set -eu

die() {
	echo "gen-secrets.sh: $*" >&2
	exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
namespace=dex
replicas=3
domain=cluster.local
out=$here/secrets
ca_dir=
extra_dns=
also_trust=
ca_only=false
DEXCTL=${DEXCTL:-dexctl}

while [ $# -gt 0 ]; do
	case $1 in
	-n | --namespace) [ $# -ge 2 ] || die "$1 needs a value"; namespace=$2; shift 2 ;;
	-r | --replicas) [ $# -ge 2 ] || die "$1 needs a value"; replicas=$2; shift 2 ;;
	-d | --cluster-domain) [ $# -ge 2 ] || die "$1 needs a value"; domain=$2; shift 2 ;;
	-o | --out) [ $# -ge 2 ] || die "$1 needs a value"; out=$2; shift 2 ;;
	--dns) [ $# -ge 2 ] || die "$1 needs a value"; extra_dns=$extra_dns,$2; shift 2 ;;
	--ca-dir) [ $# -ge 2 ] || die "$1 needs a value"; ca_dir=$2; shift 2 ;;
	--also-trust) [ $# -ge 2 ] || die "$1 needs a value"; also_trust=$2; shift 2 ;;
	--ca-only) ca_only=true; shift ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
done

# A namespace is a DNS label; the domain is DNS labels joined by dots.
case $namespace in
'' | -* | *- | *[!a-z0-9-]*) die "--namespace $namespace is not a DNS label (a-z, 0-9, '-')" ;;
esac
case $domain in
'' | .* | *. | *..* | *[!a-z0-9.-]*) die "--cluster-domain $domain is not a DNS name" ;;
esac
case $replicas in
'' | *[!0-9]* | 0*) die "--replicas $replicas is not a positive number" ;;
esac
command -v "$DEXCTL" >/dev/null 2>&1 || die "no $DEXCTL: put dexctl on PATH or set DEXCTL (make build writes bin/dexctl)"
if [ -n "$also_trust" ]; then
	grep -q -- '-----BEGIN CERTIFICATE-----' "$also_trust" 2>/dev/null ||
		die "--also-trust $also_trust holds no PEM certificate"
fi
[ -n "$ca_dir" ] || ca_dir=$out/ca
if [ "$ca_only" = true ]; then
	for s in dexd-tls dexworker-tls; do
		[ -f "$out/$s/tls.crt" ] || die "--ca-only: $out/$s/tls.crt does not exist yet"
	done
fi

# Keys and tokens: readable by their owner alone.
umask 077
mkdir -p "$out"
if [ ! -f "$ca_dir/dex-ca.pem" ]; then
	"$DEXCTL" tls ca create --dir "$ca_dir" >/dev/null
	echo "made a new CA in $ca_dir"
fi

# Everything is written to a scratch directory first and moved into place
# at the end, so a failure leaves the previous files whole.
new=$(mktemp -d "$out/.new.XXXXXX")
trap 'rm -rf "$new"' EXIT
cat "$ca_dir/dex-ca.pem" ${also_trust:+"$also_trust"} >"$new/ca.crt"

if [ "$ca_only" = false ]; then
	dns=
	i=0
	while [ "$i" -lt "$replicas" ]; do
		pod=dexd-$i.dexd-peers
		dns=$dns,$pod,$pod.$namespace,$pod.$namespace.svc,$pod.$namespace.svc.$domain
		i=$((i + 1))
	done
	dns=$dns,dexd,dexd.$namespace,dexd.$namespace.svc,dexd.$namespace.svc.$domain$extra_dns
	"$DEXCTL" tls cert create --ca-dir "$ca_dir" --dir "$new" --server dexd --dns "${dns#,}" >/dev/null
	"$DEXCTL" tls cert create --ca-dir "$ca_dir" --dir "$new" --client dexworker >/dev/null
fi

for s in dexd-tls dexworker-tls dexd-token; do
	mkdir -p "$out/$s"
done
if [ "$ca_only" = false ]; then
	mv "$new/dexd-server.pem" "$out/dexd-tls/tls.crt"
	mv "$new/dexd-server-key.pem" "$out/dexd-tls/tls.key"
	mv "$new/dexworker-client.pem" "$out/dexworker-tls/tls.crt"
	mv "$new/dexworker-client-key.pem" "$out/dexworker-tls/tls.key"
fi
cp "$new/ca.crt" "$out/dexworker-tls/ca.crt"
mv "$new/ca.crt" "$out/dexd-tls/ca.crt"

# The token is made once: once the cluster has recorded it, a new one comes
# from `dexctl token create` (docs/tls-and-tokens.md, "Rotate").
if [ ! -s "$out/dexd-token/token" ]; then
	od -An -v -tx1 -N32 /dev/urandom | tr -d ' \n' >"$out/dexd-token/token"
	echo >>"$out/dexd-token/token"
	echo "made the nodes' admin token $out/dexd-token/token"
fi

if [ "$ca_only" = true ]; then
	echo "wrote the CA bundle to $out/dexd-tls/ca.crt and $out/dexworker-tls/ca.crt"
else
	echo "wrote the certificates for namespace $namespace ($replicas pods) to $out"
fi
echo "keep $ca_dir/dex-ca-key.pem off the cluster; next: kubectl apply -k $here -n $namespace"
