"""The kubelet plugin wire contract: our .proto files and the message modules generated from
them by ``generate.sh`` (committed; regenerate after editing a .proto)."""
