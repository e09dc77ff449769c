{{- define "courier-worker.labels" -}}
app.kubernetes.io/name: courier-worker
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "courier-worker.username" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ .Values.serviceAccount }}
{{- end -}}
