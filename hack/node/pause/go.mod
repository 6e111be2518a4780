module kopf-dra.local/node/pause

go 1.26.0
