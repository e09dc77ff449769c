{{- define "courier.labels" -}}
app.kubernetes.io/name: courier
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}
{{- define "courier.selector" -}}
app.kubernetes.io/name: courier
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
