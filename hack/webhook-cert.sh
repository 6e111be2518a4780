#!/usr/bin/env bash
# The pool validator's webhook without cert-manager: make a CA and a serving certificate for the
# webhook Service, store them in the Secret the Deployment mounts, and put the CA into the
# ValidatingWebhookConfiguration. Needs openssl and kubectl (KUBECONFIG as usual).
#   kubectl apply -k manifests/pool-validator/webhook && hack/webhook-cert.sh
#   kubectl -n kopf-dra set env deploy/kopf-dra-pool-validator KOPF_DRA_WEBHOOK=true
set -euo pipefail
NAMESPACE=${NAMESPACE:-kopf-dra}
SERVICE=${SERVICE:-kopf-dra-pool-validator-webhook}
SECRET=${SECRET:-kopf-dra-pool-validator-webhook-tls}
CONFIGURATION=${CONFIGURATION:-pool-validator.kopf-dra.io}
DAYS=${DAYS:-365}

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
host="$SERVICE.$NAMESPACE.svc"
openssl req -x509 -newkey rsa:2048 -nodes -days "$DAYS" -subj "/CN=kopf-dra-webhook-ca" \
  -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=$host" \
  -keyout "$dir/tls.key" -out "$dir/tls.csr" 2>/dev/null
printf 'subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s.cluster.local\n' \
  "$host" "$SERVICE" "$NAMESPACE" "$host" > "$dir/san.cnf"
openssl x509 -req -in "$dir/tls.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial \
  -days "$DAYS" -extfile "$dir/san.cnf" -out "$dir/tls.crt" 2>/dev/null

kubectl -n "$NAMESPACE" create secret generic "$SECRET" \
  --from-file=tls.crt="$dir/tls.crt" --from-file=tls.key="$dir/tls.key" \
  --from-file=ca.crt="$dir/ca.crt" --dry-run=client -o yaml | kubectl apply -f -
ca=$(base64 -w0 < "$dir/ca.crt")
kubectl patch validatingwebhookconfiguration "$CONFIGURATION" --type=json \
  -p "[{\"op\":\"add\",\"path\":\"/webhooks/0/clientConfig/caBundle\",\"value\":\"$ca\"}]"
