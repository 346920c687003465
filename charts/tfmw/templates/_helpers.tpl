{{/* <registry>/<name>:<tag>, the tag defaulting to the chart's appVersion. */}}
{{- define "tfmw.image" -}}
{{- $tag := .root.Values.image.tag | default .root.Chart.AppVersion -}}
{{- printf "%s/%s:%s" .root.Values.image.registry .name $tag -}}
{{- end -}}
