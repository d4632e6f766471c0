{{/* The chart's name, or nameOverride. */}}
{{- define "gnomon.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's base name: fullnameOverride, else RELEASE-gnomon (RELEASE alone when it
names the chart already). */}}
{{- define "gnomon.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gnomon.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "gnomon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gnomon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gnomon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gnomon.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "gnomon.secretName" -}}
{{- default (printf "%s-credentials" (include "gnomon.fullname" .)) .Values.credentials.existingSecret -}}
{{- end -}}

{{- define "gnomon.metaEndpoint" -}}
{{ include "gnomon.fullname" . }}-meta:{{ .Values.meta.grpcPort }}
{{- end -}}

{{/* The settings files (TOML, one table per role): the keys are the roles' settings, the same
the flags and GNOMON_* variables name. */}}
{{- define "gnomon.metaToml" -}}
{{- $settings := dict
  "etcd" (join "," .Values.etcd.endpoints)
  "bind" "0.0.0.0"
  "grpc_port" .Values.meta.grpcPort
  "namespace" .Values.etcd.namespace
  "shards" .Values.meta.shards -}}
[meta]
{{ include "gnomon.tomlPairs" (mergeOverwrite $settings .Values.meta.settings) }}
{{- end -}}

{{/* Where the SSTs live, as the data nodes and the compaction nodes both name it. */}}
{{- define "gnomon.store" -}}
{{- printf "s3://%s/%s" .Values.objectStorage.s3.bucket .Values.objectStorage.s3.prefix | trimSuffix "/" -}}
{{- end -}}

{{/* The S3 settings of a role's settings map (the map is changed in place). */}}
{{- define "gnomon.setS3" -}}
{{- $s3 := .root.Values.objectStorage.s3 -}}
{{- $_ := set .settings "store" (include "gnomon.store" .root) -}}
{{- if $s3.endpoint }}{{ $_ := set .settings "s3_endpoint" $s3.endpoint }}{{ end -}}
{{- if $s3.region }}{{ $_ := set .settings "s3_region" $s3.region }}{{ end -}}
{{- end -}}

{{- define "gnomon.nodeToml" -}}
{{- $settings := dict
  "data_dir" "/var/lib/gnomon"
  "bind" "0.0.0.0"
  "insecure" true
  "http_port" .Values.dataNode.ports.http
  "grpc_port" .Values.dataNode.ports.grpc
  "flight_port" .Values.dataNode.ports.flight
  "meta" (include "gnomon.metaEndpoint" .)
  "wal" (printf "kafka://%s" (join "," .Values.kafka.brokerEndpoints))
  "kafka_namespace" .Values.kafka.topicPrefix
  "log_level" .Values.logLevel -}}
{{- include "gnomon.setS3" (dict "root" . "settings" $settings) -}}
{{- if .Values.compactionNode.enabled -}}
{{- $_ := set $settings "compaction_mode" "offload" -}}
{{- end -}}
{{- if eq .Values.catalog.backend "etcd" -}}
{{- $_ := set $settings "catalog" (printf "etcd://%s%s/catalog" (join "," .Values.etcd.endpoints) (.Values.etcd.namespace | trimSuffix "/")) -}}
{{- end -}}
[node]
{{ include "gnomon.tomlPairs" (mergeOverwrite $settings .Values.dataNode.settings) }}
{{- end -}}

{{- define "gnomon.compactionNodeToml" -}}
{{- $c := .Values.compactionNode -}}
{{- $settings := dict
  "meta" (include "gnomon.metaEndpoint" .)
  "executor" $c.executor
  "slots" $c.slots
  "data_dir" "/var/lib/gnomon"
  "bind" "0.0.0.0"
  "grpc_port" $c.grpcPort
  "http_port" $c.httpPort
  "log_level" .Values.logLevel -}}
{{- include "gnomon.setS3" (dict "root" . "settings" $settings) -}}
{{- with $c.rayAddress }}{{ $_ := set $settings "ray_address" . }}{{ end -}}
[compaction_node]
{{ include "gnomon.tomlPairs" (mergeOverwrite $settings $c.settings) }}
{{- end -}}

{{/* key = value lines of a map, sorted by key; a JSON string, number or boolean is a TOML
one too. */}}
{{- define "gnomon.tomlPairs" -}}
{{- range $i, $key := keys . | sortAlpha }}
{{- if $i }}{{ "\n" }}{{ end }}
{{- $key }} = {{ get $ $key | toJson }}
{{- end -}}
{{- end -}}

{{- define "gnomon.checkValues" -}}
{{- if not (has .Values.catalog.backend (list "etcd" "postgresql")) -}}
{{- fail (printf "catalog.backend must be etcd or postgresql, not %q" .Values.catalog.backend) -}}
{{- end -}}
{{- if and (eq .Values.catalog.backend "postgresql") (not .Values.credentials.existingSecret) (not .Values.credentials.postgresqlUrl) -}}
{{- fail "catalog.backend postgresql needs credentials.postgresqlUrl or credentials.existingSecret (key catalog-url)" -}}
{{- end -}}
{{- if lt (int .Values.meta.replicas) 1 -}}
{{- fail "meta.replicas must be at least 1" -}}
{{- end -}}
{{- end -}}

{{/* The pod and container security settings every role shares: the image's unprivileged
user, nothing more than it needs. */}}
{{- define "gnomon.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "gnomon.containerSecurityContext" -}}
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
{{- end -}}

{{/* S3 credentials from the Secret (optional: without them the pod's own identity signs). */}}
{{- define "gnomon.s3Env" -}}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ include "gnomon.secretName" . }}
      key: s3-access-key-id
      optional: true
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ include "gnomon.secretName" . }}
      key: s3-secret-access-key
      optional: true
{{- if .Values.objectStorage.s3.region }}
- name: AWS_DEFAULT_REGION
  value: {{ .Values.objectStorage.s3.region | quote }}
{{- end }}
{{- end -}}
