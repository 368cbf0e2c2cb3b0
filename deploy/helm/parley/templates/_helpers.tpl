{{- define "parley.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "parley.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "parley.headless" -}}
{{- printf "%s-headless" (include "parley.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "parley.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "parley.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "parley.selectorLabels" -}}
app.kubernetes.io/name: {{ include "parley.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "parley.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "parley.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "parley.secretName" -}}
{{- default (include "parley.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* The headless Service's DNS domain: <pod>.<this> reaches one pod. */}}
{{- define "parley.peerDomain" -}}
{{- printf "%s.%s.svc.%s" (include "parley.headless" .) .Release.Namespace .Values.clusterDomain }}
{{- end }}

{{/* The server configuration without secrets and per-pod keys (those the
init container adds). Values' config is merged over the chart's keys. */}}
{{- define "parley.config" -}}
{{- $c := dict
  "data_dir" "/data"
  "http_addr" (printf ":%d" (int .Values.ports.http))
  "tcp_addr" (printf ":%d" (int .Values.ports.tcp))
  "drain_window" (printf "%ds" (int .Values.drainWindowSeconds))
-}}
{{- if .Values.cluster.enabled }}
{{- $_ := set $c "postgres_schema" .Values.postgres.schema }}
{{- if eq .Values.cluster.nats.mode "embedded" }}
{{- $routes := list }}
{{- range $i := until (int .Values.replicaCount) }}
{{- $routes = append $routes (printf "nats://%s-%d.%s:%d" (include "parley.fullname" $) $i (include "parley.peerDomain" $) (int $.Values.cluster.nats.routePort)) }}
{{- end }}
{{- $_ := set $c "nats_cluster_listen" (printf "0.0.0.0:%d" (int .Values.cluster.nats.routePort)) }}
{{- $_ := set $c "nats_routes" $routes }}
{{- $_ := set $c "nats_cluster_name" .Values.cluster.nats.clusterName }}
{{- else }}
{{- $_ := set $c "nats_subject_prefix" .Values.cluster.nats.subjectPrefix }}
{{- end }}
{{- end }}
{{- toYaml (mergeOverwrite $c (deepCopy .Values.config)) }}
{{- end }}

{{/* Refuse values that would deploy a cluster that cannot start. */}}
{{- define "parley.validate" -}}
{{- $v := .Values }}
{{- if and (gt (int $v.replicaCount) 1) (not $v.cluster.enabled) }}
{{- fail "replicaCount above 1 needs cluster.enabled (the embedded store belongs to one node)" }}
{{- end }}
{{- if lt (int $v.terminationGracePeriodSeconds) (add (int $v.drainWindowSeconds) 10) }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least drainWindowSeconds (%d) + 10: the pod would be killed while it drains" (int $v.terminationGracePeriodSeconds) (int $v.drainWindowSeconds)) }}
{{- end }}
{{- if not (has $v.cluster.nats.mode (list "embedded" "external")) }}
{{- fail (printf "cluster.nats.mode must be embedded or external, got %q" $v.cluster.nats.mode) }}
{{- end }}
{{- if and $v.cluster.enabled (not $v.secrets.existingSecret) }}
{{- range $k := list "postgresURL" "tokenKey" "appSecret" "adminAPIKey" }}
{{- if not (index $v.secrets $k) }}
{{- fail (printf "a cluster needs secrets.%s (the same on every node), or secrets.existingSecret" $k) }}
{{- end }}
{{- end }}
{{- if and (eq $v.cluster.nats.mode "embedded") (lt (len $v.secrets.natsClusterSecret) 16) }}
{{- fail "embedded NATS needs secrets.natsClusterSecret, at least 16 bytes" }}
{{- end }}
{{- if and (eq $v.cluster.nats.mode "external") (not $v.secrets.natsURLs) }}
{{- fail "external NATS needs secrets.natsURLs" }}
{{- end }}
{{- end }}
{{- range $k := list "postgres_url" "token_key" "app_secret" "admin_api_keys" "nats_cluster_secret" "nats_urls" "webhook_secret" "webpush_vapid_private_key" "node_id" "nats_cluster_advertise" }}
{{- if hasKey $v.config $k }}
{{- fail (printf "config.%s: set it through secrets (or, for node_id and nats_cluster_advertise, leave it to the chart)" $k) }}
{{- end }}
{{- end }}
{{- end }}
