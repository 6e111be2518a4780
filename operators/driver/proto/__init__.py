"""The kubelet plugin wire contract: our .proto files, the kubelet's DRA health protos, and the
message modules generated from them by ``generate.sh`` (committed; regenerate after editing a
.proto)."""
