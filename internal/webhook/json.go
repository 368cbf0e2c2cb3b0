package webhook

import "google.golang.org/protobuf/encoding/protojson"

// protoJSON renders messages in their canonical JSON mapping, as the
// WebSocket JSON frames do (camelCase fields, bytes in base64).
var protoJSON = protojson.MarshalOptions{}
