{{/* The image: repository and tag, the tag defaulting to the chart's appVersion. */}}
{{- define "kopf-dra.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* Leader election of a kopf operator (operators/settings.py, LeaderElectionSettings): every
replica campaigns for its component's Lease in the release namespace; its identity is the pod. */}}
{{- define "kopf-dra.leaderElection" -}}
- name: KOPF_DRA_LEADER_ELECT
  value: {{ .Values.leaderElection.enabled | quote }}
- name: KOPF_DRA_LEASE_NAMESPACE
  value: {{ .Release.Namespace }}
- name: KOPF_DRA_LEASE_DURATION
  value: {{ .Values.leaderElection.leaseDuration | quote }}
- name: KOPF_DRA_RENEW_DEADLINE
  value: {{ .Values.leaderElection.renewDeadline | quote }}
- name: KOPF_DRA_RETRY_PERIOD
  value: {{ .Values.leaderElection.retryPeriod | quote }}
- name: KOPF_DRA_IDENTITY
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
{{- end }}

{{/* featureGates as Kubernetes spells them on a command line: Name=true,Other=false (sorted);
nothing at all when none is set, so each component keeps its defaults. */}}
{{- define "kopf-dra.featureGates" -}}
{{- if .Values.featureGates }}
{{- $gates := list }}
{{- range $name, $on := .Values.featureGates }}
{{- $gates = append $gates (printf "%s=%t" $name $on) }}
{{- end }}
- name: KOPF_DRA_FEATURE_GATES
  value: {{ join "," $gates | quote }}
{{- end }}
{{- end }}
