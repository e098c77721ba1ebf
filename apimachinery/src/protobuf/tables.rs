//! Generated message tables: protobuf field numbers of the Kubernetes API types
//! (stable groups plus `meta/v1`) mapped to their JSON names and value types.
//! Produced by `scripts/gen-protobuf-tables.py` from the `protobuf`/`json` struct tags of
//! k8s.io/api and k8s.io/apimachinery v0.36.3; regenerate rather than edit by hand.

use super::schema::{Card::*, Emit::*, Msg, Ty::*, f};

/// Message descriptors; `Ty::Msg(n)` refers to `MESSAGES[n]`.
pub(super) static MESSAGES: &[Msg] = &[
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicy",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(156), S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicyBinding",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(157), S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicyBindingList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(1), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicyList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(0), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingWebhookConfiguration",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "webhooks", Msg(159), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingWebhookConfigurationList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(4), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicy",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(160), S, O),
            f(3, "status", Msg(161), S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicyBinding",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(162), S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicyBindingList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(7), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicyList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(6), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingWebhookConfiguration",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "webhooks", Msg(163), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingWebhookConfigurationList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(10), R, O),
        ],
    },
    Msg {
        name: "apps.v1.ControllerRevision",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "data", RawExtension, S, O),
            f(3, "revision", I64, S, A),
        ],
    },
    Msg {
        name: "apps.v1.ControllerRevisionList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(12), R, O),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSet",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(164), S, O),
            f(3, "status", Msg(165), S, O),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSetList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(14), R, O),
        ],
    },
    Msg {
        name: "apps.v1.Deployment",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(166), S, O),
            f(3, "status", Msg(167), S, O),
        ],
    },
    Msg {
        name: "apps.v1.DeploymentList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(16), R, O),
        ],
    },
    Msg {
        name: "apps.v1.ReplicaSet",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(168), S, O),
            f(3, "status", Msg(169), S, O),
        ],
    },
    Msg {
        name: "apps.v1.ReplicaSetList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(18), R, O),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSet",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(170), S, O),
            f(3, "status", Msg(171), S, O),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(20), R, O),
        ],
    },
    Msg {
        name: "authentication.v1.SelfSubjectReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "status", Msg(172), S, O),
        ],
    },
    Msg {
        name: "authentication.v1.TokenRequest",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(173), S, A),
            f(3, "status", Msg(174), S, O),
        ],
    },
    Msg {
        name: "authentication.v1.TokenReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(175), S, A),
            f(3, "status", Msg(176), S, O),
        ],
    },
    Msg {
        name: "authorization.v1.LocalSubjectAccessReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(177), S, A),
            f(3, "status", Msg(178), S, O),
        ],
    },
    Msg {
        name: "authorization.v1.SelfSubjectAccessReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(179), S, A),
            f(3, "status", Msg(178), S, O),
        ],
    },
    Msg {
        name: "authorization.v1.SelfSubjectRulesReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(180), S, A),
            f(3, "status", Msg(181), S, O),
        ],
    },
    Msg {
        name: "authorization.v1.SubjectAccessReview",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(177), S, A),
            f(3, "status", Msg(178), S, O),
        ],
    },
    Msg {
        name: "autoscaling.v1.HorizontalPodAutoscaler",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(182), S, O),
            f(3, "status", Msg(183), S, O),
        ],
    },
    Msg {
        name: "autoscaling.v1.HorizontalPodAutoscalerList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(29), R, O),
        ],
    },
    Msg {
        name: "autoscaling.v1.Scale",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(184), S, O),
            f(3, "status", Msg(185), S, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscaler",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(186), S, O),
            f(3, "status", Msg(187), S, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscalerList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(32), R, O),
        ],
    },
    Msg {
        name: "batch.v1.CronJob",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(188), S, O),
            f(3, "status", Msg(189), S, O),
        ],
    },
    Msg {
        name: "batch.v1.CronJobList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(34), R, O),
        ],
    },
    Msg {
        name: "batch.v1.Job",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(190), S, O),
            f(3, "status", Msg(191), S, O),
        ],
    },
    Msg {
        name: "batch.v1.JobList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(36), R, O),
        ],
    },
    Msg {
        name: "certificates.v1.CertificateSigningRequest",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(192), S, A),
            f(3, "status", Msg(193), S, O),
        ],
    },
    Msg {
        name: "certificates.v1.CertificateSigningRequestList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(38), R, O),
        ],
    },
    Msg {
        name: "coordination.v1.Lease",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(194), S, O),
        ],
    },
    Msg {
        name: "coordination.v1.LeaseList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(40), R, O),
        ],
    },
    Msg {
        name: "core.v1.Binding",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "target", Msg(195), S, A),
        ],
    },
    Msg {
        name: "core.v1.ComponentStatus",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "conditions", Msg(196), R, O),
        ],
    },
    Msg {
        name: "core.v1.ComponentStatusList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(43), R, O),
        ],
    },
    Msg {
        name: "core.v1.ConfigMap",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "data", Str, M, O),
            f(3, "binaryData", Bytes, M, O),
            f(4, "immutable", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ConfigMapList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(45), R, O),
        ],
    },
    Msg {
        name: "core.v1.Endpoints",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "subsets", Msg(197), R, O),
        ],
    },
    Msg {
        name: "core.v1.EndpointsList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(47), R, O),
        ],
    },
    Msg {
        name: "core.v1.Event",
        fields: &[
            f(1, "metadata", Msg(155), S, A),
            f(2, "involvedObject", Msg(195), S, A),
            f(3, "reason", Str, S, O),
            f(4, "message", Str, S, O),
            f(5, "source", Msg(198), S, O),
            f(6, "firstTimestamp", Time, S, O),
            f(7, "lastTimestamp", Time, S, O),
            f(8, "count", I32, S, O),
            f(9, "type", Str, S, O),
            f(10, "eventTime", MicroTime, S, O),
            f(11, "series", Msg(199), S, P),
            f(12, "action", Str, S, O),
            f(13, "related", Msg(195), S, P),
            f(14, "reportingComponent", Str, S, A),
            f(15, "reportingInstance", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.EventList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(49), R, O),
        ],
    },
    Msg {
        name: "core.v1.LimitRange",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(200), S, O),
        ],
    },
    Msg {
        name: "core.v1.LimitRangeList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(51), R, O),
        ],
    },
    Msg {
        name: "core.v1.Namespace",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(201), S, O),
            f(3, "status", Msg(202), S, O),
        ],
    },
    Msg {
        name: "core.v1.NamespaceList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(53), R, O),
        ],
    },
    Msg {
        name: "core.v1.Node",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(203), S, O),
            f(3, "status", Msg(204), S, O),
        ],
    },
    Msg {
        name: "core.v1.NodeList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(55), R, O),
        ],
    },
    Msg {
        name: "core.v1.NodeProxyOptions",
        fields: &[f(1, "path", Str, S, O)],
    },
    Msg {
        name: "core.v1.PersistentVolume",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(205), S, O),
            f(3, "status", Msg(206), S, O),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaim",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(207), S, O),
            f(3, "status", Msg(208), S, O),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(59), R, O),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(58), R, O),
        ],
    },
    Msg {
        name: "core.v1.Pod",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(209), S, O),
            f(3, "status", Msg(210), S, O),
        ],
    },
    Msg {
        name: "core.v1.PodAttachOptions",
        fields: &[
            f(1, "stdin", Bool, S, O),
            f(2, "stdout", Bool, S, O),
            f(3, "stderr", Bool, S, O),
            f(4, "tty", Bool, S, O),
            f(5, "container", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.PodExecOptions",
        fields: &[
            f(1, "stdin", Bool, S, O),
            f(2, "stdout", Bool, S, O),
            f(3, "stderr", Bool, S, O),
            f(4, "tty", Bool, S, O),
            f(5, "container", Str, S, O),
            f(6, "command", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.PodList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(62), R, O),
        ],
    },
    Msg {
        name: "core.v1.PodLogOptions",
        fields: &[
            f(1, "container", Str, S, O),
            f(2, "follow", Bool, S, O),
            f(3, "previous", Bool, S, O),
            f(4, "sinceSeconds", I64, S, P),
            f(5, "sinceTime", Time, S, P),
            f(6, "timestamps", Bool, S, O),
            f(7, "tailLines", I64, S, P),
            f(8, "limitBytes", I64, S, P),
            f(9, "insecureSkipTLSVerifyBackend", Bool, S, O),
            f(10, "stream", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PodPortForwardOptions",
        fields: &[f(1, "ports", I32, R, O)],
    },
    Msg {
        name: "core.v1.PodProxyOptions",
        fields: &[f(1, "path", Str, S, O)],
    },
    Msg {
        name: "core.v1.PodStatusResult",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "status", Msg(210), S, O),
        ],
    },
    Msg {
        name: "core.v1.PodTemplate",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "template", Msg(211), S, O),
        ],
    },
    Msg {
        name: "core.v1.PodTemplateList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(70), R, O),
        ],
    },
    Msg {
        name: "core.v1.RangeAllocation",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "range", Str, S, A),
            f(3, "data", Bytes, S, A),
        ],
    },
    Msg {
        name: "core.v1.ReplicationController",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(212), S, O),
            f(3, "status", Msg(213), S, O),
        ],
    },
    Msg {
        name: "core.v1.ReplicationControllerList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(73), R, O),
        ],
    },
    Msg {
        name: "core.v1.ResourceQuota",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(214), S, O),
            f(3, "status", Msg(215), S, O),
        ],
    },
    Msg {
        name: "core.v1.ResourceQuotaList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(75), R, O),
        ],
    },
    Msg {
        name: "core.v1.Secret",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "data", Bytes, M, O),
            f(3, "type", Str, S, O),
            f(4, "stringData", Str, M, O),
            f(5, "immutable", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.SecretList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(77), R, O),
        ],
    },
    Msg {
        name: "core.v1.SerializedReference",
        fields: &[f(1, "reference", Msg(195), S, O)],
    },
    Msg {
        name: "core.v1.Service",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(216), S, O),
            f(3, "status", Msg(217), S, O),
        ],
    },
    Msg {
        name: "core.v1.ServiceAccount",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "secrets", Msg(195), R, O),
            f(3, "imagePullSecrets", Msg(218), R, O),
            f(4, "automountServiceAccountToken", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ServiceAccountList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(81), R, O),
        ],
    },
    Msg {
        name: "core.v1.ServiceList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(80), R, O),
        ],
    },
    Msg {
        name: "core.v1.ServiceProxyOptions",
        fields: &[f(1, "path", Str, S, O)],
    },
    Msg {
        name: "discovery.v1.EndpointSlice",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "endpoints", Msg(219), R, O),
            f(3, "ports", Msg(220), R, O),
            f(4, "addressType", Str, S, A),
        ],
    },
    Msg {
        name: "discovery.v1.EndpointSliceList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(85), R, O),
        ],
    },
    Msg {
        name: "events.v1.Event",
        fields: &[
            f(1, "metadata", Msg(155), S, A),
            f(2, "eventTime", MicroTime, S, A),
            f(3, "series", Msg(221), S, P),
            f(4, "reportingController", Str, S, O),
            f(5, "reportingInstance", Str, S, O),
            f(6, "action", Str, S, O),
            f(7, "reason", Str, S, O),
            f(8, "regarding", Msg(195), S, O),
            f(9, "related", Msg(195), S, P),
            f(10, "note", Str, S, O),
            f(11, "type", Str, S, O),
            f(12, "deprecatedSource", Msg(198), S, O),
            f(13, "deprecatedFirstTimestamp", Time, S, O),
            f(14, "deprecatedLastTimestamp", Time, S, O),
            f(15, "deprecatedCount", I32, S, O),
        ],
    },
    Msg {
        name: "events.v1.EventList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(87), R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.FlowSchema",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(222), S, O),
            f(3, "status", Msg(223), S, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.FlowSchemaList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(89), R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfiguration",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(224), S, O),
            f(3, "status", Msg(225), S, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfigurationList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(91), R, O),
        ],
    },
    Msg {
        name: "meta.v1.APIGroup",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "versions", Msg(226), R, O),
            f(3, "preferredVersion", Msg(226), S, O),
            f(4, "serverAddressByClientCIDRs", Msg(227), R, O),
        ],
    },
    Msg {
        name: "meta.v1.APIGroupList",
        fields: &[f(1, "groups", Msg(93), R, O)],
    },
    Msg {
        name: "meta.v1.APIResourceList",
        fields: &[
            f(1, "groupVersion", Str, S, A),
            f(2, "resources", Msg(228), R, O),
        ],
    },
    Msg {
        name: "meta.v1.APIVersions",
        fields: &[
            f(1, "versions", Str, R, O),
            f(2, "serverAddressByClientCIDRs", Msg(227), R, O),
        ],
    },
    Msg {
        name: "meta.v1.ApplyOptions",
        fields: &[
            f(1, "dryRun", Str, R, O),
            f(2, "force", Bool, S, A),
            f(3, "fieldManager", Str, S, A),
        ],
    },
    Msg {
        name: "meta.v1.CreateOptions",
        fields: &[
            f(1, "dryRun", Str, R, O),
            f(3, "fieldManager", Str, S, O),
            f(4, "fieldValidation", Str, S, O),
        ],
    },
    Msg {
        name: "meta.v1.DeleteOptions",
        fields: &[
            f(1, "gracePeriodSeconds", I64, S, P),
            f(2, "preconditions", Msg(229), S, P),
            f(3, "orphanDependents", Bool, S, P),
            f(4, "propagationPolicy", Str, S, P),
            f(5, "dryRun", Str, R, O),
            f(
                6,
                "ignoreStoreReadErrorWithClusterBreakingPotential",
                Bool,
                S,
                P,
            ),
        ],
    },
    Msg {
        name: "meta.v1.GetOptions",
        fields: &[f(1, "resourceVersion", Str, S, O)],
    },
    Msg {
        name: "meta.v1.List",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", RawExtension, R, O),
        ],
    },
    Msg {
        name: "meta.v1.ListOptions",
        fields: &[
            f(1, "labelSelector", Str, S, O),
            f(2, "fieldSelector", Str, S, O),
            f(3, "watch", Bool, S, O),
            f(4, "resourceVersion", Str, S, O),
            f(5, "timeoutSeconds", I64, S, P),
            f(7, "limit", I64, S, O),
            f(8, "continue", Str, S, O),
            f(9, "allowWatchBookmarks", Bool, S, O),
            f(10, "resourceVersionMatch", Str, S, O),
            f(11, "sendInitialEvents", Bool, S, P),
            f(15, "shardSelector", Str, S, O),
        ],
    },
    Msg {
        name: "meta.v1.PartialObjectMetadata",
        fields: &[f(1, "metadata", Msg(155), S, O)],
    },
    Msg {
        name: "meta.v1.PartialObjectMetadataList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(103), R, O),
        ],
    },
    Msg {
        name: "meta.v1.PatchOptions",
        fields: &[
            f(1, "dryRun", Str, R, O),
            f(2, "force", Bool, S, P),
            f(3, "fieldManager", Str, S, O),
            f(4, "fieldValidation", Str, S, O),
        ],
    },
    Msg {
        name: "meta.v1.Status",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "status", Str, S, O),
            f(3, "message", Str, S, O),
            f(4, "reason", Str, S, O),
            f(5, "details", Msg(230), S, P),
            f(6, "code", I32, S, O),
        ],
    },
    Msg {
        name: "meta.v1.Table",
        fields: &[],
    },
    Msg {
        name: "meta.v1.TableOptions",
        fields: &[f(1, "includeObject", Str, S, O)],
    },
    Msg {
        name: "meta.v1.UpdateOptions",
        fields: &[
            f(1, "dryRun", Str, R, O),
            f(2, "fieldManager", Str, S, O),
            f(3, "fieldValidation", Str, S, O),
        ],
    },
    Msg {
        name: "networking.v1.IPAddress",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(231), S, O),
        ],
    },
    Msg {
        name: "networking.v1.IPAddressList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(110), R, O),
        ],
    },
    Msg {
        name: "networking.v1.Ingress",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(232), S, O),
            f(3, "status", Msg(233), S, O),
        ],
    },
    Msg {
        name: "networking.v1.IngressClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(234), S, O),
        ],
    },
    Msg {
        name: "networking.v1.IngressClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(113), R, O),
        ],
    },
    Msg {
        name: "networking.v1.IngressList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(112), R, O),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicy",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(235), S, O),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicyList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(116), R, O),
        ],
    },
    Msg {
        name: "networking.v1.ServiceCIDR",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(236), S, O),
            f(3, "status", Msg(237), S, O),
        ],
    },
    Msg {
        name: "networking.v1.ServiceCIDRList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(118), R, O),
        ],
    },
    Msg {
        name: "node.v1.RuntimeClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "handler", Str, S, A),
            f(3, "overhead", Msg(238), S, P),
            f(4, "scheduling", Msg(239), S, P),
        ],
    },
    Msg {
        name: "node.v1.RuntimeClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(120), R, O),
        ],
    },
    Msg {
        name: "policy.v1.Eviction",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "deleteOptions", Msg(99), S, P),
        ],
    },
    Msg {
        name: "policy.v1.PodDisruptionBudget",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(240), S, O),
            f(3, "status", Msg(241), S, O),
        ],
    },
    Msg {
        name: "policy.v1.PodDisruptionBudgetList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(123), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.ClusterRole",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "rules", Msg(242), R, O),
            f(3, "aggregationRule", Msg(243), S, P),
        ],
    },
    Msg {
        name: "rbac.v1.ClusterRoleBinding",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "subjects", Msg(244), R, O),
            f(3, "roleRef", Msg(245), S, A),
        ],
    },
    Msg {
        name: "rbac.v1.ClusterRoleBindingList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(126), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.ClusterRoleList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(125), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.Role",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "rules", Msg(242), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.RoleBinding",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "subjects", Msg(244), R, O),
            f(3, "roleRef", Msg(245), S, A),
        ],
    },
    Msg {
        name: "rbac.v1.RoleBindingList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(130), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.RoleList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(129), R, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(246), S, A),
        ],
    },
    Msg {
        name: "resource.v1.DeviceClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(133), R, O),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaim",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(247), S, A),
            f(3, "status", Msg(248), S, O),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(135), R, O),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimTemplate",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(249), S, A),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimTemplateList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(137), R, O),
        ],
    },
    Msg {
        name: "resource.v1.ResourceSlice",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(250), S, A),
        ],
    },
    Msg {
        name: "resource.v1.ResourceSliceList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(139), R, O),
        ],
    },
    Msg {
        name: "scheduling.v1.PriorityClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "value", I32, S, A),
            f(3, "globalDefault", Bool, S, O),
            f(4, "description", Str, S, O),
            f(5, "preemptionPolicy", Str, S, P),
        ],
    },
    Msg {
        name: "scheduling.v1.PriorityClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(141), R, O),
        ],
    },
    Msg {
        name: "storage.v1.CSIDriver",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(251), S, A),
        ],
    },
    Msg {
        name: "storage.v1.CSIDriverList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(143), R, O),
        ],
    },
    Msg {
        name: "storage.v1.CSINode",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(252), S, A),
        ],
    },
    Msg {
        name: "storage.v1.CSINodeList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(145), R, O),
        ],
    },
    Msg {
        name: "storage.v1.CSIStorageCapacity",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "nodeTopology", Msg(253), S, P),
            f(3, "storageClassName", Str, S, A),
            f(4, "capacity", Quantity, S, P),
            f(5, "maximumVolumeSize", Quantity, S, P),
        ],
    },
    Msg {
        name: "storage.v1.CSIStorageCapacityList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(147), R, O),
        ],
    },
    Msg {
        name: "storage.v1.StorageClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "provisioner", Str, S, A),
            f(3, "parameters", Str, M, O),
            f(4, "reclaimPolicy", Str, S, P),
            f(5, "mountOptions", Str, R, O),
            f(6, "allowVolumeExpansion", Bool, S, P),
            f(7, "volumeBindingMode", Str, S, P),
            f(8, "allowedTopologies", Msg(254), R, O),
        ],
    },
    Msg {
        name: "storage.v1.StorageClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(149), R, O),
        ],
    },
    Msg {
        name: "storage.v1.VolumeAttachment",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(255), S, A),
            f(3, "status", Msg(256), S, O),
        ],
    },
    Msg {
        name: "storage.v1.VolumeAttachmentList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(151), R, O),
        ],
    },
    Msg {
        name: "storage.v1.VolumeAttributesClass",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "driverName", Str, S, A),
            f(3, "parameters", Str, M, O),
        ],
    },
    Msg {
        name: "storage.v1.VolumeAttributesClassList",
        fields: &[
            f(1, "metadata", Msg(158), S, O),
            f(2, "items", Msg(153), R, O),
        ],
    },
    Msg {
        name: "meta.v1.ObjectMeta",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "generateName", Str, S, O),
            f(3, "namespace", Str, S, O),
            f(4, "selfLink", Str, S, O),
            f(5, "uid", Str, S, O),
            f(6, "resourceVersion", Str, S, O),
            f(7, "generation", I64, S, O),
            f(8, "creationTimestamp", Time, S, O),
            f(9, "deletionTimestamp", Time, S, P),
            f(10, "deletionGracePeriodSeconds", I64, S, P),
            f(11, "labels", Str, M, O),
            f(12, "annotations", Str, M, O),
            f(13, "ownerReferences", Msg(257), R, O),
            f(14, "finalizers", Str, R, O),
            f(17, "managedFields", Msg(258), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicySpec",
        fields: &[
            f(1, "paramKind", Msg(259), S, P),
            f(2, "matchConstraints", Msg(260), S, P),
            f(3, "variables", Msg(261), R, O),
            f(4, "mutations", Msg(262), R, O),
            f(5, "failurePolicy", Str, S, P),
            f(6, "matchConditions", Msg(263), R, O),
            f(7, "reinvocationPolicy", Str, S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingAdmissionPolicyBindingSpec",
        fields: &[
            f(1, "policyName", Str, S, O),
            f(2, "paramRef", Msg(264), S, P),
            f(3, "matchResources", Msg(260), S, P),
        ],
    },
    Msg {
        name: "meta.v1.ListMeta",
        fields: &[
            f(1, "selfLink", Str, S, O),
            f(2, "resourceVersion", Str, S, O),
            f(3, "continue", Str, S, O),
            f(4, "remainingItemCount", I64, S, P),
            f(5, "shardInfo", Msg(265), S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MutatingWebhook",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "clientConfig", Msg(266), S, A),
            f(3, "rules", Msg(267), R, O),
            f(4, "failurePolicy", Str, S, P),
            f(5, "namespaceSelector", Msg(253), S, P),
            f(6, "sideEffects", Str, S, P),
            f(7, "timeoutSeconds", I32, S, P),
            f(8, "admissionReviewVersions", Str, R, O),
            f(9, "matchPolicy", Str, S, P),
            f(10, "reinvocationPolicy", Str, S, P),
            f(11, "objectSelector", Msg(253), S, P),
            f(12, "matchConditions", Msg(263), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicySpec",
        fields: &[
            f(1, "paramKind", Msg(259), S, P),
            f(2, "matchConstraints", Msg(260), S, P),
            f(3, "validations", Msg(268), R, O),
            f(4, "failurePolicy", Str, S, P),
            f(5, "auditAnnotations", Msg(269), R, O),
            f(6, "matchConditions", Msg(263), R, O),
            f(7, "variables", Msg(261), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicyStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, O),
            f(2, "typeChecking", Msg(270), S, P),
            f(3, "conditions", Msg(271), R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingAdmissionPolicyBindingSpec",
        fields: &[
            f(1, "policyName", Str, S, O),
            f(2, "paramRef", Msg(264), S, P),
            f(3, "matchResources", Msg(260), S, P),
            f(4, "validationActions", Str, R, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ValidatingWebhook",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "clientConfig", Msg(266), S, A),
            f(3, "rules", Msg(267), R, O),
            f(4, "failurePolicy", Str, S, P),
            f(5, "namespaceSelector", Msg(253), S, P),
            f(6, "sideEffects", Str, S, P),
            f(7, "timeoutSeconds", I32, S, P),
            f(8, "admissionReviewVersions", Str, R, O),
            f(9, "matchPolicy", Str, S, P),
            f(10, "objectSelector", Msg(253), S, P),
            f(11, "matchConditions", Msg(263), R, O),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSetSpec",
        fields: &[
            f(1, "selector", Msg(253), S, P),
            f(2, "template", Msg(211), S, A),
            f(3, "updateStrategy", Msg(272), S, O),
            f(4, "minReadySeconds", I32, S, O),
            f(6, "revisionHistoryLimit", I32, S, P),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSetStatus",
        fields: &[
            f(1, "currentNumberScheduled", I32, S, A),
            f(2, "numberMisscheduled", I32, S, A),
            f(3, "desiredNumberScheduled", I32, S, A),
            f(4, "numberReady", I32, S, A),
            f(5, "observedGeneration", I64, S, O),
            f(6, "updatedNumberScheduled", I32, S, O),
            f(7, "numberAvailable", I32, S, O),
            f(8, "numberUnavailable", I32, S, O),
            f(9, "collisionCount", I32, S, P),
            f(10, "conditions", Msg(273), R, O),
        ],
    },
    Msg {
        name: "apps.v1.DeploymentSpec",
        fields: &[
            f(1, "replicas", I32, S, P),
            f(2, "selector", Msg(253), S, P),
            f(3, "template", Msg(211), S, A),
            f(4, "strategy", Msg(274), S, O),
            f(5, "minReadySeconds", I32, S, O),
            f(6, "revisionHistoryLimit", I32, S, P),
            f(7, "paused", Bool, S, O),
            f(9, "progressDeadlineSeconds", I32, S, P),
        ],
    },
    Msg {
        name: "apps.v1.DeploymentStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, O),
            f(2, "replicas", I32, S, O),
            f(3, "updatedReplicas", I32, S, O),
            f(4, "availableReplicas", I32, S, O),
            f(5, "unavailableReplicas", I32, S, O),
            f(6, "conditions", Msg(275), R, O),
            f(7, "readyReplicas", I32, S, O),
            f(8, "collisionCount", I32, S, P),
            f(9, "terminatingReplicas", I32, S, P),
        ],
    },
    Msg {
        name: "apps.v1.ReplicaSetSpec",
        fields: &[
            f(1, "replicas", I32, S, P),
            f(2, "selector", Msg(253), S, P),
            f(3, "template", Msg(211), S, O),
            f(4, "minReadySeconds", I32, S, O),
        ],
    },
    Msg {
        name: "apps.v1.ReplicaSetStatus",
        fields: &[
            f(1, "replicas", I32, S, A),
            f(2, "fullyLabeledReplicas", I32, S, O),
            f(3, "observedGeneration", I64, S, O),
            f(4, "readyReplicas", I32, S, O),
            f(5, "availableReplicas", I32, S, O),
            f(6, "conditions", Msg(276), R, O),
            f(7, "terminatingReplicas", I32, S, P),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetSpec",
        fields: &[
            f(1, "replicas", I32, S, P),
            f(2, "selector", Msg(253), S, P),
            f(3, "template", Msg(211), S, A),
            f(4, "volumeClaimTemplates", Msg(59), R, O),
            f(5, "serviceName", Str, S, A),
            f(6, "podManagementPolicy", Str, S, O),
            f(7, "updateStrategy", Msg(277), S, O),
            f(8, "revisionHistoryLimit", I32, S, P),
            f(9, "minReadySeconds", I32, S, O),
            f(10, "persistentVolumeClaimRetentionPolicy", Msg(278), S, P),
            f(11, "ordinals", Msg(279), S, P),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, O),
            f(2, "replicas", I32, S, A),
            f(3, "readyReplicas", I32, S, O),
            f(4, "currentReplicas", I32, S, O),
            f(5, "updatedReplicas", I32, S, O),
            f(6, "currentRevision", Str, S, O),
            f(7, "updateRevision", Str, S, O),
            f(9, "collisionCount", I32, S, P),
            f(10, "conditions", Msg(280), R, O),
            f(11, "availableReplicas", I32, S, A),
        ],
    },
    Msg {
        name: "authentication.v1.SelfSubjectReviewStatus",
        fields: &[f(1, "userInfo", Msg(281), S, O)],
    },
    Msg {
        name: "authentication.v1.TokenRequestSpec",
        fields: &[
            f(1, "audiences", Str, R, O),
            f(3, "boundObjectRef", Msg(282), S, P),
            f(4, "expirationSeconds", I64, S, P),
        ],
    },
    Msg {
        name: "authentication.v1.TokenRequestStatus",
        fields: &[
            f(1, "token", Str, S, A),
            f(2, "expirationTimestamp", Time, S, A),
        ],
    },
    Msg {
        name: "authentication.v1.TokenReviewSpec",
        fields: &[f(1, "token", Str, S, O), f(2, "audiences", Str, R, O)],
    },
    Msg {
        name: "authentication.v1.TokenReviewStatus",
        fields: &[
            f(1, "authenticated", Bool, S, O),
            f(2, "user", Msg(281), S, O),
            f(3, "error", Str, S, O),
            f(4, "audiences", Str, R, O),
        ],
    },
    Msg {
        name: "authorization.v1.SubjectAccessReviewSpec",
        fields: &[
            f(1, "resourceAttributes", Msg(283), S, P),
            f(2, "nonResourceAttributes", Msg(284), S, P),
            f(3, "user", Str, S, O),
            f(4, "groups", Str, R, O),
            f(5, "extra", List(&Str), M, O),
            f(6, "uid", Str, S, O),
        ],
    },
    Msg {
        name: "authorization.v1.SubjectAccessReviewStatus",
        fields: &[
            f(1, "allowed", Bool, S, A),
            f(2, "reason", Str, S, O),
            f(3, "evaluationError", Str, S, O),
            f(4, "denied", Bool, S, O),
        ],
    },
    Msg {
        name: "authorization.v1.SelfSubjectAccessReviewSpec",
        fields: &[
            f(1, "resourceAttributes", Msg(283), S, P),
            f(2, "nonResourceAttributes", Msg(284), S, P),
        ],
    },
    Msg {
        name: "authorization.v1.SelfSubjectRulesReviewSpec",
        fields: &[f(1, "namespace", Str, S, O)],
    },
    Msg {
        name: "authorization.v1.SubjectRulesReviewStatus",
        fields: &[
            f(1, "resourceRules", Msg(285), R, O),
            f(2, "nonResourceRules", Msg(286), R, O),
            f(3, "incomplete", Bool, S, A),
            f(4, "evaluationError", Str, S, O),
        ],
    },
    Msg {
        name: "autoscaling.v1.HorizontalPodAutoscalerSpec",
        fields: &[
            f(1, "scaleTargetRef", Msg(287), S, A),
            f(2, "minReplicas", I32, S, P),
            f(3, "maxReplicas", I32, S, A),
            f(4, "targetCPUUtilizationPercentage", I32, S, P),
        ],
    },
    Msg {
        name: "autoscaling.v1.HorizontalPodAutoscalerStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, P),
            f(2, "lastScaleTime", Time, S, P),
            f(3, "currentReplicas", I32, S, A),
            f(4, "desiredReplicas", I32, S, A),
            f(5, "currentCPUUtilizationPercentage", I32, S, P),
        ],
    },
    Msg {
        name: "autoscaling.v1.ScaleSpec",
        fields: &[f(1, "replicas", I32, S, O)],
    },
    Msg {
        name: "autoscaling.v1.ScaleStatus",
        fields: &[f(1, "replicas", I32, S, A), f(2, "selector", Str, S, O)],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscalerSpec",
        fields: &[
            f(1, "scaleTargetRef", Msg(288), S, A),
            f(2, "minReplicas", I32, S, P),
            f(3, "maxReplicas", I32, S, A),
            f(4, "metrics", Msg(289), R, O),
            f(5, "behavior", Msg(290), S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscalerStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, P),
            f(2, "lastScaleTime", Time, S, P),
            f(3, "currentReplicas", I32, S, O),
            f(4, "desiredReplicas", I32, S, A),
            f(5, "currentMetrics", Msg(291), R, O),
            f(6, "conditions", Msg(292), R, O),
        ],
    },
    Msg {
        name: "batch.v1.CronJobSpec",
        fields: &[
            f(1, "schedule", Str, S, A),
            f(2, "startingDeadlineSeconds", I64, S, P),
            f(3, "concurrencyPolicy", Str, S, O),
            f(4, "suspend", Bool, S, P),
            f(5, "jobTemplate", Msg(293), S, A),
            f(6, "successfulJobsHistoryLimit", I32, S, P),
            f(7, "failedJobsHistoryLimit", I32, S, P),
            f(8, "timeZone", Str, S, P),
        ],
    },
    Msg {
        name: "batch.v1.CronJobStatus",
        fields: &[
            f(1, "active", Msg(195), R, O),
            f(4, "lastScheduleTime", Time, S, P),
            f(5, "lastSuccessfulTime", Time, S, P),
        ],
    },
    Msg {
        name: "batch.v1.JobSpec",
        fields: &[
            f(1, "parallelism", I32, S, P),
            f(2, "completions", I32, S, P),
            f(3, "activeDeadlineSeconds", I64, S, P),
            f(4, "selector", Msg(253), S, P),
            f(5, "manualSelector", Bool, S, P),
            f(6, "template", Msg(211), S, A),
            f(7, "backoffLimit", I32, S, P),
            f(8, "ttlSecondsAfterFinished", I32, S, P),
            f(9, "completionMode", Str, S, P),
            f(10, "suspend", Bool, S, P),
            f(11, "podFailurePolicy", Msg(294), S, P),
            f(12, "backoffLimitPerIndex", I32, S, P),
            f(13, "maxFailedIndexes", I32, S, P),
            f(14, "podReplacementPolicy", Str, S, P),
            f(15, "managedBy", Str, S, P),
            f(16, "successPolicy", Msg(295), S, P),
        ],
    },
    Msg {
        name: "batch.v1.JobStatus",
        fields: &[
            f(1, "conditions", Msg(296), R, O),
            f(2, "startTime", Time, S, P),
            f(3, "completionTime", Time, S, P),
            f(4, "active", I32, S, O),
            f(5, "succeeded", I32, S, O),
            f(6, "failed", I32, S, O),
            f(7, "completedIndexes", Str, S, O),
            f(8, "uncountedTerminatedPods", Msg(297), S, P),
            f(9, "ready", I32, S, P),
            f(10, "failedIndexes", Str, S, P),
            f(11, "terminating", I32, S, P),
        ],
    },
    Msg {
        name: "certificates.v1.CertificateSigningRequestSpec",
        fields: &[
            f(1, "request", Bytes, S, A),
            f(2, "username", Str, S, O),
            f(3, "uid", Str, S, O),
            f(4, "groups", Str, R, O),
            f(5, "usages", Str, R, O),
            f(6, "extra", List(&Str), M, O),
            f(7, "signerName", Str, S, A),
            f(8, "expirationSeconds", I32, S, P),
        ],
    },
    Msg {
        name: "certificates.v1.CertificateSigningRequestStatus",
        fields: &[
            f(1, "conditions", Msg(298), R, O),
            f(2, "certificate", Bytes, S, O),
        ],
    },
    Msg {
        name: "coordination.v1.LeaseSpec",
        fields: &[
            f(1, "holderIdentity", Str, S, P),
            f(2, "leaseDurationSeconds", I32, S, P),
            f(3, "acquireTime", MicroTime, S, P),
            f(4, "renewTime", MicroTime, S, P),
            f(5, "leaseTransitions", I32, S, P),
            f(6, "strategy", Str, S, P),
            f(7, "preferredHolder", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.ObjectReference",
        fields: &[
            f(1, "kind", Str, S, O),
            f(2, "namespace", Str, S, O),
            f(3, "name", Str, S, O),
            f(4, "uid", Str, S, O),
            f(5, "apiVersion", Str, S, O),
            f(6, "resourceVersion", Str, S, O),
            f(7, "fieldPath", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.ComponentCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "message", Str, S, O),
            f(4, "error", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.EndpointSubset",
        fields: &[
            f(1, "addresses", Msg(299), R, O),
            f(2, "notReadyAddresses", Msg(299), R, O),
            f(3, "ports", Msg(300), R, O),
        ],
    },
    Msg {
        name: "core.v1.EventSource",
        fields: &[f(1, "component", Str, S, O), f(2, "host", Str, S, O)],
    },
    Msg {
        name: "core.v1.EventSeries",
        fields: &[
            f(1, "count", I32, S, O),
            f(2, "lastObservedTime", MicroTime, S, O),
        ],
    },
    Msg {
        name: "core.v1.LimitRangeSpec",
        fields: &[f(1, "limits", Msg(301), R, O)],
    },
    Msg {
        name: "core.v1.NamespaceSpec",
        fields: &[f(1, "finalizers", Str, R, O)],
    },
    Msg {
        name: "core.v1.NamespaceStatus",
        fields: &[f(1, "phase", Str, S, O), f(2, "conditions", Msg(302), R, O)],
    },
    Msg {
        name: "core.v1.NodeSpec",
        fields: &[
            f(1, "podCIDR", Str, S, O),
            f(2, "externalID", Str, S, O),
            f(3, "providerID", Str, S, O),
            f(4, "unschedulable", Bool, S, O),
            f(5, "taints", Msg(303), R, O),
            f(6, "configSource", Msg(304), S, P),
            f(7, "podCIDRs", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.NodeStatus",
        fields: &[
            f(1, "capacity", Quantity, M, O),
            f(2, "allocatable", Quantity, M, O),
            f(3, "phase", Str, S, O),
            f(4, "conditions", Msg(305), R, O),
            f(5, "addresses", Msg(306), R, O),
            f(6, "daemonEndpoints", Msg(307), S, O),
            f(7, "nodeInfo", Msg(308), S, O),
            f(8, "images", Msg(309), R, O),
            f(9, "volumesInUse", Str, R, O),
            f(10, "volumesAttached", Msg(310), R, O),
            f(11, "config", Msg(311), S, P),
            f(12, "runtimeHandlers", Msg(312), R, O),
            f(13, "features", Msg(313), S, P),
            f(14, "declaredFeatures", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeSpec",
        fields: &[
            f(1, "capacity", Quantity, M, O),
            f(2, "", Msg(314), I, O),
            f(3, "accessModes", Str, R, O),
            f(4, "claimRef", Msg(195), S, P),
            f(5, "persistentVolumeReclaimPolicy", Str, S, O),
            f(6, "storageClassName", Str, S, O),
            f(7, "mountOptions", Str, R, O),
            f(8, "volumeMode", Str, S, P),
            f(9, "nodeAffinity", Msg(315), S, P),
            f(10, "volumeAttributesClassName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeStatus",
        fields: &[
            f(1, "phase", Str, S, O),
            f(2, "message", Str, S, O),
            f(3, "reason", Str, S, O),
            f(4, "lastPhaseTransitionTime", Time, S, P),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimSpec",
        fields: &[
            f(1, "accessModes", Str, R, O),
            f(2, "resources", Msg(316), S, O),
            f(3, "volumeName", Str, S, O),
            f(4, "selector", Msg(253), S, P),
            f(5, "storageClassName", Str, S, P),
            f(6, "volumeMode", Str, S, P),
            f(7, "dataSource", Msg(317), S, P),
            f(8, "dataSourceRef", Msg(318), S, P),
            f(9, "volumeAttributesClassName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimStatus",
        fields: &[
            f(1, "phase", Str, S, O),
            f(2, "accessModes", Str, R, O),
            f(3, "capacity", Quantity, M, O),
            f(4, "conditions", Msg(319), R, O),
            f(5, "allocatedResources", Quantity, M, O),
            f(7, "allocatedResourceStatuses", Str, M, O),
            f(8, "currentVolumeAttributesClassName", Str, S, P),
            f(9, "modifyVolumeStatus", Msg(320), S, P),
        ],
    },
    Msg {
        name: "core.v1.PodSpec",
        fields: &[
            f(1, "volumes", Msg(321), R, O),
            f(2, "containers", Msg(322), R, O),
            f(3, "restartPolicy", Str, S, O),
            f(4, "terminationGracePeriodSeconds", I64, S, P),
            f(5, "activeDeadlineSeconds", I64, S, P),
            f(6, "dnsPolicy", Str, S, O),
            f(7, "nodeSelector", Str, M, O),
            f(8, "serviceAccountName", Str, S, O),
            f(9, "serviceAccount", Str, S, O),
            f(10, "nodeName", Str, S, O),
            f(11, "hostNetwork", Bool, S, O),
            f(12, "hostPID", Bool, S, O),
            f(13, "hostIPC", Bool, S, O),
            f(14, "securityContext", Msg(323), S, P),
            f(15, "imagePullSecrets", Msg(218), R, O),
            f(16, "hostname", Str, S, O),
            f(17, "subdomain", Str, S, O),
            f(18, "affinity", Msg(324), S, P),
            f(19, "schedulerName", Str, S, O),
            f(20, "initContainers", Msg(322), R, O),
            f(21, "automountServiceAccountToken", Bool, S, P),
            f(22, "tolerations", Msg(325), R, O),
            f(23, "hostAliases", Msg(326), R, O),
            f(24, "priorityClassName", Str, S, O),
            f(25, "priority", I32, S, P),
            f(26, "dnsConfig", Msg(327), S, P),
            f(27, "shareProcessNamespace", Bool, S, P),
            f(28, "readinessGates", Msg(328), R, O),
            f(29, "runtimeClassName", Str, S, P),
            f(30, "enableServiceLinks", Bool, S, P),
            f(31, "preemptionPolicy", Str, S, P),
            f(32, "overhead", Quantity, M, O),
            f(33, "topologySpreadConstraints", Msg(329), R, O),
            f(34, "ephemeralContainers", Msg(330), R, O),
            f(35, "setHostnameAsFQDN", Bool, S, P),
            f(36, "os", Msg(331), S, P),
            f(37, "hostUsers", Bool, S, P),
            f(38, "schedulingGates", Msg(332), R, O),
            f(39, "resourceClaims", Msg(333), R, O),
            f(40, "resources", Msg(334), S, P),
            f(41, "hostnameOverride", Str, S, P),
            f(43, "schedulingGroup", Msg(335), S, P),
        ],
    },
    Msg {
        name: "core.v1.PodStatus",
        fields: &[
            f(1, "phase", Str, S, O),
            f(2, "conditions", Msg(336), R, O),
            f(3, "message", Str, S, O),
            f(4, "reason", Str, S, O),
            f(5, "hostIP", Str, S, O),
            f(6, "podIP", Str, S, O),
            f(7, "startTime", Time, S, P),
            f(8, "containerStatuses", Msg(337), R, O),
            f(9, "qosClass", Str, S, O),
            f(10, "initContainerStatuses", Msg(337), R, O),
            f(11, "nominatedNodeName", Str, S, O),
            f(12, "podIPs", Msg(338), R, O),
            f(13, "ephemeralContainerStatuses", Msg(337), R, O),
            f(14, "resize", Str, S, O),
            f(15, "resourceClaimStatuses", Msg(339), R, O),
            f(16, "hostIPs", Msg(340), R, O),
            f(17, "observedGeneration", I64, S, O),
            f(18, "extendedResourceClaimStatus", Msg(341), S, P),
            f(19, "allocatedResources", Quantity, M, O),
            f(20, "resources", Msg(334), S, P),
            f(21, "nodeAllocatableResourceClaimStatuses", Msg(342), R, O),
        ],
    },
    Msg {
        name: "core.v1.PodTemplateSpec",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(209), S, O),
        ],
    },
    Msg {
        name: "core.v1.ReplicationControllerSpec",
        fields: &[
            f(1, "replicas", I32, S, P),
            f(2, "selector", Str, M, O),
            f(3, "template", Msg(211), S, P),
            f(4, "minReadySeconds", I32, S, O),
        ],
    },
    Msg {
        name: "core.v1.ReplicationControllerStatus",
        fields: &[
            f(1, "replicas", I32, S, A),
            f(2, "fullyLabeledReplicas", I32, S, O),
            f(3, "observedGeneration", I64, S, O),
            f(4, "readyReplicas", I32, S, O),
            f(5, "availableReplicas", I32, S, O),
            f(6, "conditions", Msg(343), R, O),
        ],
    },
    Msg {
        name: "core.v1.ResourceQuotaSpec",
        fields: &[
            f(1, "hard", Quantity, M, O),
            f(2, "scopes", Str, R, O),
            f(3, "scopeSelector", Msg(344), S, P),
        ],
    },
    Msg {
        name: "core.v1.ResourceQuotaStatus",
        fields: &[f(1, "hard", Quantity, M, O), f(2, "used", Quantity, M, O)],
    },
    Msg {
        name: "core.v1.ServiceSpec",
        fields: &[
            f(1, "ports", Msg(345), R, O),
            f(2, "selector", Str, M, O),
            f(3, "clusterIP", Str, S, O),
            f(4, "type", Str, S, O),
            f(5, "externalIPs", Str, R, O),
            f(7, "sessionAffinity", Str, S, O),
            f(8, "loadBalancerIP", Str, S, O),
            f(9, "loadBalancerSourceRanges", Str, R, O),
            f(10, "externalName", Str, S, O),
            f(11, "externalTrafficPolicy", Str, S, O),
            f(12, "healthCheckNodePort", I32, S, O),
            f(13, "publishNotReadyAddresses", Bool, S, O),
            f(14, "sessionAffinityConfig", Msg(346), S, P),
            f(17, "ipFamilyPolicy", Str, S, P),
            f(18, "clusterIPs", Str, R, O),
            f(19, "ipFamilies", Str, R, O),
            f(20, "allocateLoadBalancerNodePorts", Bool, S, P),
            f(21, "loadBalancerClass", Str, S, P),
            f(22, "internalTrafficPolicy", Str, S, P),
            f(23, "trafficDistribution", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.ServiceStatus",
        fields: &[
            f(1, "loadBalancer", Msg(347), S, O),
            f(2, "conditions", Msg(271), R, O),
        ],
    },
    Msg {
        name: "core.v1.LocalObjectReference",
        fields: &[f(1, "name", Str, S, O)],
    },
    Msg {
        name: "discovery.v1.Endpoint",
        fields: &[
            f(1, "addresses", Str, R, O),
            f(2, "conditions", Msg(348), S, O),
            f(3, "hostname", Str, S, P),
            f(4, "targetRef", Msg(195), S, P),
            f(5, "deprecatedTopology", Str, M, O),
            f(6, "nodeName", Str, S, P),
            f(7, "zone", Str, S, P),
            f(8, "hints", Msg(349), S, P),
        ],
    },
    Msg {
        name: "discovery.v1.EndpointPort",
        fields: &[
            f(1, "name", Str, S, P),
            f(2, "protocol", Str, S, P),
            f(3, "port", I32, S, P),
            f(4, "appProtocol", Str, S, P),
        ],
    },
    Msg {
        name: "events.v1.EventSeries",
        fields: &[
            f(1, "count", I32, S, A),
            f(2, "lastObservedTime", MicroTime, S, A),
        ],
    },
    Msg {
        name: "flowcontrol.v1.FlowSchemaSpec",
        fields: &[
            f(1, "priorityLevelConfiguration", Msg(350), S, A),
            f(2, "matchingPrecedence", I32, S, A),
            f(3, "distinguisherMethod", Msg(351), S, P),
            f(4, "rules", Msg(352), R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.FlowSchemaStatus",
        fields: &[f(1, "conditions", Msg(353), R, O)],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfigurationSpec",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "limited", Msg(354), S, P),
            f(3, "exempt", Msg(355), S, P),
        ],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfigurationStatus",
        fields: &[f(1, "conditions", Msg(356), R, O)],
    },
    Msg {
        name: "meta.v1.GroupVersionForDiscovery",
        fields: &[f(1, "groupVersion", Str, S, A), f(2, "version", Str, S, A)],
    },
    Msg {
        name: "meta.v1.ServerAddressByClientCIDR",
        fields: &[
            f(1, "clientCIDR", Str, S, A),
            f(2, "serverAddress", Str, S, A),
        ],
    },
    Msg {
        name: "meta.v1.APIResource",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "namespaced", Bool, S, A),
            f(3, "kind", Str, S, A),
            f(4, "verbs", List(&Str), S, A),
            f(5, "shortNames", Str, R, O),
            f(6, "singularName", Str, S, A),
            f(7, "categories", Str, R, O),
            f(8, "group", Str, S, O),
            f(9, "version", Str, S, O),
            f(10, "storageVersionHash", Str, S, O),
        ],
    },
    Msg {
        name: "meta.v1.Preconditions",
        fields: &[f(1, "uid", Str, S, P), f(2, "resourceVersion", Str, S, P)],
    },
    Msg {
        name: "meta.v1.StatusDetails",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "group", Str, S, O),
            f(3, "kind", Str, S, O),
            f(4, "causes", Msg(357), R, O),
            f(5, "retryAfterSeconds", I32, S, O),
            f(6, "uid", Str, S, O),
        ],
    },
    Msg {
        name: "networking.v1.IPAddressSpec",
        fields: &[f(1, "parentRef", Msg(358), S, P)],
    },
    Msg {
        name: "networking.v1.IngressSpec",
        fields: &[
            f(1, "defaultBackend", Msg(359), S, P),
            f(2, "tls", Msg(360), R, O),
            f(3, "rules", Msg(361), R, O),
            f(4, "ingressClassName", Str, S, P),
        ],
    },
    Msg {
        name: "networking.v1.IngressStatus",
        fields: &[f(1, "loadBalancer", Msg(362), S, O)],
    },
    Msg {
        name: "networking.v1.IngressClassSpec",
        fields: &[
            f(1, "controller", Str, S, O),
            f(2, "parameters", Msg(363), S, P),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicySpec",
        fields: &[
            f(1, "podSelector", Msg(253), S, A),
            f(2, "ingress", Msg(364), R, O),
            f(3, "egress", Msg(365), R, O),
            f(4, "policyTypes", Str, R, O),
        ],
    },
    Msg {
        name: "networking.v1.ServiceCIDRSpec",
        fields: &[f(1, "cidrs", Str, R, O)],
    },
    Msg {
        name: "networking.v1.ServiceCIDRStatus",
        fields: &[f(1, "conditions", Msg(271), R, O)],
    },
    Msg {
        name: "node.v1.Overhead",
        fields: &[f(1, "podFixed", Quantity, M, O)],
    },
    Msg {
        name: "node.v1.Scheduling",
        fields: &[
            f(1, "nodeSelector", Str, M, O),
            f(2, "tolerations", Msg(325), R, O),
        ],
    },
    Msg {
        name: "policy.v1.PodDisruptionBudgetSpec",
        fields: &[
            f(1, "minAvailable", IntOrString, S, P),
            f(2, "selector", Msg(253), S, P),
            f(3, "maxUnavailable", IntOrString, S, P),
            f(4, "unhealthyPodEvictionPolicy", Str, S, P),
        ],
    },
    Msg {
        name: "policy.v1.PodDisruptionBudgetStatus",
        fields: &[
            f(1, "observedGeneration", I64, S, O),
            f(2, "disruptedPods", Time, M, O),
            f(3, "disruptionsAllowed", I32, S, A),
            f(4, "currentHealthy", I32, S, A),
            f(5, "desiredHealthy", I32, S, A),
            f(6, "expectedPods", I32, S, A),
            f(7, "conditions", Msg(271), R, O),
        ],
    },
    Msg {
        name: "rbac.v1.PolicyRule",
        fields: &[
            f(1, "verbs", Str, R, O),
            f(2, "apiGroups", Str, R, O),
            f(3, "resources", Str, R, O),
            f(4, "resourceNames", Str, R, O),
            f(5, "nonResourceURLs", Str, R, O),
        ],
    },
    Msg {
        name: "rbac.v1.AggregationRule",
        fields: &[f(1, "clusterRoleSelectors", Msg(253), R, O)],
    },
    Msg {
        name: "rbac.v1.Subject",
        fields: &[
            f(1, "kind", Str, S, A),
            f(2, "apiGroup", Str, S, O),
            f(3, "name", Str, S, A),
            f(4, "namespace", Str, S, O),
        ],
    },
    Msg {
        name: "rbac.v1.RoleRef",
        fields: &[
            f(1, "apiGroup", Str, S, A),
            f(2, "kind", Str, S, A),
            f(3, "name", Str, S, A),
        ],
    },
    Msg {
        name: "resource.v1.DeviceClassSpec",
        fields: &[
            f(1, "selectors", Msg(366), R, O),
            f(2, "config", Msg(367), R, O),
            f(4, "extendedResourceName", Str, S, P),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimSpec",
        fields: &[f(1, "devices", Msg(368), S, A)],
    },
    Msg {
        name: "resource.v1.ResourceClaimStatus",
        fields: &[
            f(1, "allocation", Msg(369), S, P),
            f(2, "reservedFor", Msg(370), R, O),
            f(4, "devices", Msg(371), R, O),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimTemplateSpec",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(247), S, A),
        ],
    },
    Msg {
        name: "resource.v1.ResourceSliceSpec",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "pool", Msg(372), S, A),
            f(3, "nodeName", Str, S, P),
            f(4, "nodeSelector", Msg(373), S, P),
            f(5, "allNodes", Bool, S, P),
            f(6, "devices", Msg(374), R, O),
            f(7, "perDeviceNodeSelection", Bool, S, P),
            f(8, "sharedCounters", Msg(375), R, O),
        ],
    },
    Msg {
        name: "storage.v1.CSIDriverSpec",
        fields: &[
            f(1, "attachRequired", Bool, S, P),
            f(2, "podInfoOnMount", Bool, S, P),
            f(3, "volumeLifecycleModes", Str, R, O),
            f(4, "storageCapacity", Bool, S, P),
            f(5, "fsGroupPolicy", Str, S, P),
            f(6, "tokenRequests", Msg(376), R, O),
            f(7, "requiresRepublish", Bool, S, P),
            f(8, "seLinuxMount", Bool, S, P),
            f(9, "nodeAllocatableUpdatePeriodSeconds", I64, S, P),
            f(10, "serviceAccountTokenInSecrets", Bool, S, P),
            f(11, "preventPodSchedulingIfMissing", Bool, S, P),
        ],
    },
    Msg {
        name: "storage.v1.CSINodeSpec",
        fields: &[f(1, "drivers", Msg(377), R, O)],
    },
    Msg {
        name: "meta.v1.LabelSelector",
        fields: &[
            f(1, "matchLabels", Str, M, O),
            f(2, "matchExpressions", Msg(378), R, O),
        ],
    },
    Msg {
        name: "core.v1.TopologySelectorTerm",
        fields: &[f(1, "matchLabelExpressions", Msg(379), R, O)],
    },
    Msg {
        name: "storage.v1.VolumeAttachmentSpec",
        fields: &[
            f(1, "attacher", Str, S, A),
            f(2, "source", Msg(380), S, A),
            f(3, "nodeName", Str, S, A),
        ],
    },
    Msg {
        name: "storage.v1.VolumeAttachmentStatus",
        fields: &[
            f(1, "attached", Bool, S, A),
            f(2, "attachmentMetadata", Str, M, O),
            f(3, "attachError", Msg(381), S, P),
            f(4, "detachError", Msg(381), S, P),
        ],
    },
    Msg {
        name: "meta.v1.OwnerReference",
        fields: &[
            f(1, "kind", Str, S, A),
            f(3, "name", Str, S, A),
            f(4, "uid", Str, S, A),
            f(5, "apiVersion", Str, S, A),
            f(6, "controller", Bool, S, P),
            f(7, "blockOwnerDeletion", Bool, S, P),
        ],
    },
    Msg {
        name: "meta.v1.ManagedFieldsEntry",
        fields: &[
            f(1, "manager", Str, S, O),
            f(2, "operation", Str, S, O),
            f(3, "apiVersion", Str, S, O),
            f(4, "time", Time, S, P),
            f(6, "fieldsType", Str, S, O),
            f(7, "fieldsV1", FieldsV1, S, P),
            f(8, "subresource", Str, S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ParamKind",
        fields: &[f(1, "apiVersion", Str, S, O), f(2, "kind", Str, S, O)],
    },
    Msg {
        name: "admissionregistration.v1.MatchResources",
        fields: &[
            f(1, "namespaceSelector", Msg(253), S, P),
            f(2, "objectSelector", Msg(253), S, P),
            f(3, "resourceRules", Msg(382), R, O),
            f(4, "excludeResourceRules", Msg(382), R, O),
            f(7, "matchPolicy", Str, S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.Variable",
        fields: &[f(1, "name", Str, S, A), f(2, "expression", Str, S, A)],
    },
    Msg {
        name: "admissionregistration.v1.Mutation",
        fields: &[
            f(2, "patchType", Str, S, A),
            f(3, "applyConfiguration", Msg(383), S, P),
            f(4, "jsonPatch", Msg(384), S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.MatchCondition",
        fields: &[f(1, "name", Str, S, A), f(2, "expression", Str, S, A)],
    },
    Msg {
        name: "admissionregistration.v1.ParamRef",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "namespace", Str, S, O),
            f(3, "selector", Msg(253), S, P),
            f(4, "parameterNotFoundAction", Str, S, P),
        ],
    },
    Msg {
        name: "meta.v1.ShardInfo",
        fields: &[f(1, "selector", Str, S, A)],
    },
    Msg {
        name: "admissionregistration.v1.WebhookClientConfig",
        fields: &[
            f(1, "service", Msg(385), S, P),
            f(2, "caBundle", Bytes, S, O),
            f(3, "url", Str, S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.RuleWithOperations",
        fields: &[f(1, "operations", Str, R, O), f(2, "", Msg(386), I, O)],
    },
    Msg {
        name: "admissionregistration.v1.Validation",
        fields: &[
            f(1, "expression", Str, S, A),
            f(2, "message", Str, S, O),
            f(3, "reason", Str, S, P),
            f(4, "messageExpression", Str, S, O),
        ],
    },
    Msg {
        name: "admissionregistration.v1.AuditAnnotation",
        fields: &[f(1, "key", Str, S, A), f(2, "valueExpression", Str, S, A)],
    },
    Msg {
        name: "admissionregistration.v1.TypeChecking",
        fields: &[f(1, "expressionWarnings", Msg(387), R, O)],
    },
    Msg {
        name: "meta.v1.Condition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "observedGeneration", I64, S, O),
            f(4, "lastTransitionTime", Time, S, A),
            f(5, "reason", Str, S, A),
            f(6, "message", Str, S, A),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSetUpdateStrategy",
        fields: &[
            f(1, "type", Str, S, O),
            f(2, "rollingUpdate", Msg(388), S, P),
        ],
    },
    Msg {
        name: "apps.v1.DaemonSetCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "apps.v1.DeploymentStrategy",
        fields: &[
            f(1, "type", Str, S, O),
            f(2, "rollingUpdate", Msg(389), S, P),
        ],
    },
    Msg {
        name: "apps.v1.DeploymentCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
            f(6, "lastUpdateTime", Time, S, O),
            f(7, "lastTransitionTime", Time, S, O),
        ],
    },
    Msg {
        name: "apps.v1.ReplicaSetCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetUpdateStrategy",
        fields: &[
            f(1, "type", Str, S, O),
            f(2, "rollingUpdate", Msg(390), S, P),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy",
        fields: &[
            f(1, "whenDeleted", Str, S, O),
            f(2, "whenScaled", Str, S, O),
        ],
    },
    Msg {
        name: "apps.v1.StatefulSetOrdinals",
        fields: &[f(1, "start", I32, S, A)],
    },
    Msg {
        name: "apps.v1.StatefulSetCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "authentication.v1.UserInfo",
        fields: &[
            f(1, "username", Str, S, O),
            f(2, "uid", Str, S, O),
            f(3, "groups", Str, R, O),
            f(4, "extra", List(&Str), M, O),
        ],
    },
    Msg {
        name: "authentication.v1.BoundObjectReference",
        fields: &[
            f(1, "kind", Str, S, O),
            f(2, "apiVersion", Str, S, O),
            f(3, "name", Str, S, O),
            f(4, "uid", Str, S, O),
        ],
    },
    Msg {
        name: "authorization.v1.ResourceAttributes",
        fields: &[
            f(1, "namespace", Str, S, O),
            f(2, "verb", Str, S, O),
            f(3, "group", Str, S, O),
            f(4, "version", Str, S, O),
            f(5, "resource", Str, S, O),
            f(6, "subresource", Str, S, O),
            f(7, "name", Str, S, O),
            f(8, "fieldSelector", Msg(391), S, P),
            f(9, "labelSelector", Msg(392), S, P),
        ],
    },
    Msg {
        name: "authorization.v1.NonResourceAttributes",
        fields: &[f(1, "path", Str, S, O), f(2, "verb", Str, S, O)],
    },
    Msg {
        name: "authorization.v1.ResourceRule",
        fields: &[
            f(1, "verbs", Str, R, O),
            f(2, "apiGroups", Str, R, O),
            f(3, "resources", Str, R, O),
            f(4, "resourceNames", Str, R, O),
        ],
    },
    Msg {
        name: "authorization.v1.NonResourceRule",
        fields: &[f(1, "verbs", Str, R, O), f(2, "nonResourceURLs", Str, R, O)],
    },
    Msg {
        name: "autoscaling.v1.CrossVersionObjectReference",
        fields: &[
            f(1, "kind", Str, S, A),
            f(2, "name", Str, S, A),
            f(3, "apiVersion", Str, S, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.CrossVersionObjectReference",
        fields: &[
            f(1, "kind", Str, S, A),
            f(2, "name", Str, S, A),
            f(3, "apiVersion", Str, S, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.MetricSpec",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "object", Msg(393), S, P),
            f(3, "pods", Msg(394), S, P),
            f(4, "resource", Msg(395), S, P),
            f(5, "external", Msg(396), S, P),
            f(7, "containerResource", Msg(397), S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscalerBehavior",
        fields: &[
            f(1, "scaleUp", Msg(398), S, P),
            f(2, "scaleDown", Msg(398), S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.MetricStatus",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "object", Msg(399), S, P),
            f(3, "pods", Msg(400), S, P),
            f(4, "resource", Msg(401), S, P),
            f(5, "external", Msg(402), S, P),
            f(7, "containerResource", Msg(403), S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.HorizontalPodAutoscalerCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "batch.v1.JobTemplateSpec",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(190), S, O),
        ],
    },
    Msg {
        name: "batch.v1.PodFailurePolicy",
        fields: &[f(1, "rules", Msg(404), R, O)],
    },
    Msg {
        name: "batch.v1.SuccessPolicy",
        fields: &[f(1, "rules", Msg(405), R, O)],
    },
    Msg {
        name: "batch.v1.JobCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastProbeTime", Time, S, O),
            f(4, "lastTransitionTime", Time, S, O),
            f(5, "reason", Str, S, O),
            f(6, "message", Str, S, O),
        ],
    },
    Msg {
        name: "batch.v1.UncountedTerminatedPods",
        fields: &[f(1, "succeeded", Str, R, O), f(2, "failed", Str, R, O)],
    },
    Msg {
        name: "certificates.v1.CertificateSigningRequestCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "reason", Str, S, O),
            f(3, "message", Str, S, O),
            f(4, "lastUpdateTime", Time, S, O),
            f(5, "lastTransitionTime", Time, S, O),
            f(6, "status", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.EndpointAddress",
        fields: &[
            f(1, "ip", Str, S, A),
            f(2, "targetRef", Msg(195), S, P),
            f(3, "hostname", Str, S, O),
            f(4, "nodeName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.EndpointPort",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "port", I32, S, A),
            f(3, "protocol", Str, S, O),
            f(4, "appProtocol", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.LimitRangeItem",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "max", Quantity, M, O),
            f(3, "min", Quantity, M, O),
            f(4, "default", Quantity, M, O),
            f(5, "defaultRequest", Quantity, M, O),
            f(6, "maxLimitRequestRatio", Quantity, M, O),
        ],
    },
    Msg {
        name: "core.v1.NamespaceCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(4, "lastTransitionTime", Time, S, O),
            f(5, "reason", Str, S, O),
            f(6, "message", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.Taint",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "value", Str, S, O),
            f(3, "effect", Str, S, A),
            f(4, "timeAdded", Time, S, P),
        ],
    },
    Msg {
        name: "core.v1.NodeConfigSource",
        fields: &[f(2, "configMap", Msg(406), S, P)],
    },
    Msg {
        name: "core.v1.NodeCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastHeartbeatTime", Time, S, O),
            f(4, "lastTransitionTime", Time, S, O),
            f(5, "reason", Str, S, O),
            f(6, "message", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.NodeAddress",
        fields: &[f(1, "type", Str, S, A), f(2, "address", Str, S, A)],
    },
    Msg {
        name: "core.v1.NodeDaemonEndpoints",
        fields: &[f(1, "kubeletEndpoint", Msg(407), S, O)],
    },
    Msg {
        name: "core.v1.NodeSystemInfo",
        fields: &[
            f(1, "machineID", Str, S, A),
            f(2, "systemUUID", Str, S, A),
            f(3, "bootID", Str, S, A),
            f(4, "kernelVersion", Str, S, A),
            f(5, "osImage", Str, S, A),
            f(6, "containerRuntimeVersion", Str, S, A),
            f(7, "kubeletVersion", Str, S, A),
            f(8, "kubeProxyVersion", Str, S, A),
            f(9, "operatingSystem", Str, S, A),
            f(10, "architecture", Str, S, A),
            f(11, "swap", Msg(408), S, P),
        ],
    },
    Msg {
        name: "core.v1.ContainerImage",
        fields: &[f(1, "names", Str, R, O), f(2, "sizeBytes", I64, S, O)],
    },
    Msg {
        name: "core.v1.AttachedVolume",
        fields: &[f(1, "name", Str, S, A), f(2, "devicePath", Str, S, A)],
    },
    Msg {
        name: "core.v1.NodeConfigStatus",
        fields: &[
            f(1, "assigned", Msg(304), S, P),
            f(2, "active", Msg(304), S, P),
            f(3, "lastKnownGood", Msg(304), S, P),
            f(4, "error", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.NodeRuntimeHandler",
        fields: &[f(1, "name", Str, S, A), f(2, "features", Msg(409), S, P)],
    },
    Msg {
        name: "core.v1.NodeFeatures",
        fields: &[f(1, "supplementalGroupsPolicy", Bool, S, P)],
    },
    Msg {
        name: "core.v1.PersistentVolumeSource",
        fields: &[
            f(1, "gcePersistentDisk", Msg(410), S, P),
            f(2, "awsElasticBlockStore", Msg(411), S, P),
            f(3, "hostPath", Msg(412), S, P),
            f(4, "glusterfs", Msg(413), S, P),
            f(5, "nfs", Msg(414), S, P),
            f(6, "rbd", Msg(415), S, P),
            f(7, "iscsi", Msg(416), S, P),
            f(8, "cinder", Msg(417), S, P),
            f(9, "cephfs", Msg(418), S, P),
            f(10, "fc", Msg(419), S, P),
            f(11, "flocker", Msg(420), S, P),
            f(12, "flexVolume", Msg(421), S, P),
            f(13, "azureFile", Msg(422), S, P),
            f(14, "vsphereVolume", Msg(423), S, P),
            f(15, "quobyte", Msg(424), S, P),
            f(16, "azureDisk", Msg(425), S, P),
            f(17, "photonPersistentDisk", Msg(426), S, P),
            f(18, "portworxVolume", Msg(427), S, P),
            f(19, "scaleIO", Msg(428), S, P),
            f(20, "local", Msg(429), S, P),
            f(21, "storageos", Msg(430), S, P),
            f(22, "csi", Msg(431), S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeNodeAffinity",
        fields: &[f(1, "required", Msg(373), S, P)],
    },
    Msg {
        name: "core.v1.VolumeResourceRequirements",
        fields: &[
            f(1, "limits", Quantity, M, O),
            f(2, "requests", Quantity, M, O),
        ],
    },
    Msg {
        name: "core.v1.TypedLocalObjectReference",
        fields: &[
            f(1, "apiGroup", Str, S, P),
            f(2, "kind", Str, S, A),
            f(3, "name", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.TypedObjectReference",
        fields: &[
            f(1, "apiGroup", Str, S, P),
            f(2, "kind", Str, S, A),
            f(3, "name", Str, S, A),
            f(4, "namespace", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastProbeTime", Time, S, O),
            f(4, "lastTransitionTime", Time, S, O),
            f(5, "reason", Str, S, O),
            f(6, "message", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.ModifyVolumeStatus",
        fields: &[
            f(1, "targetVolumeAttributesClassName", Str, S, O),
            f(2, "status", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.Volume",
        fields: &[f(1, "name", Str, S, A), f(2, "", Msg(432), I, O)],
    },
    Msg {
        name: "core.v1.Container",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "image", Str, S, O),
            f(3, "command", Str, R, O),
            f(4, "args", Str, R, O),
            f(5, "workingDir", Str, S, O),
            f(6, "ports", Msg(433), R, O),
            f(7, "env", Msg(434), R, O),
            f(8, "resources", Msg(334), S, O),
            f(9, "volumeMounts", Msg(435), R, O),
            f(10, "livenessProbe", Msg(436), S, P),
            f(11, "readinessProbe", Msg(436), S, P),
            f(12, "lifecycle", Msg(437), S, P),
            f(13, "terminationMessagePath", Str, S, O),
            f(14, "imagePullPolicy", Str, S, O),
            f(15, "securityContext", Msg(438), S, P),
            f(16, "stdin", Bool, S, O),
            f(17, "stdinOnce", Bool, S, O),
            f(18, "tty", Bool, S, O),
            f(19, "envFrom", Msg(439), R, O),
            f(20, "terminationMessagePolicy", Str, S, O),
            f(21, "volumeDevices", Msg(440), R, O),
            f(22, "startupProbe", Msg(436), S, P),
            f(23, "resizePolicy", Msg(441), R, O),
            f(24, "restartPolicy", Str, S, P),
            f(25, "restartPolicyRules", Msg(442), R, O),
        ],
    },
    Msg {
        name: "core.v1.PodSecurityContext",
        fields: &[
            f(1, "seLinuxOptions", Msg(443), S, P),
            f(2, "runAsUser", I64, S, P),
            f(3, "runAsNonRoot", Bool, S, P),
            f(4, "supplementalGroups", I64, R, O),
            f(5, "fsGroup", I64, S, P),
            f(6, "runAsGroup", I64, S, P),
            f(7, "sysctls", Msg(444), R, O),
            f(8, "windowsOptions", Msg(445), S, P),
            f(9, "fsGroupChangePolicy", Str, S, P),
            f(10, "seccompProfile", Msg(446), S, P),
            f(11, "appArmorProfile", Msg(447), S, P),
            f(12, "supplementalGroupsPolicy", Str, S, P),
            f(13, "seLinuxChangePolicy", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.Affinity",
        fields: &[
            f(1, "nodeAffinity", Msg(448), S, P),
            f(2, "podAffinity", Msg(449), S, P),
            f(3, "podAntiAffinity", Msg(450), S, P),
        ],
    },
    Msg {
        name: "core.v1.Toleration",
        fields: &[
            f(1, "key", Str, S, O),
            f(2, "operator", Str, S, O),
            f(3, "value", Str, S, O),
            f(4, "effect", Str, S, O),
            f(5, "tolerationSeconds", I64, S, P),
        ],
    },
    Msg {
        name: "core.v1.HostAlias",
        fields: &[f(1, "ip", Str, S, A), f(2, "hostnames", Str, R, O)],
    },
    Msg {
        name: "core.v1.PodDNSConfig",
        fields: &[
            f(1, "nameservers", Str, R, O),
            f(2, "searches", Str, R, O),
            f(3, "options", Msg(451), R, O),
        ],
    },
    Msg {
        name: "core.v1.PodReadinessGate",
        fields: &[f(1, "conditionType", Str, S, A)],
    },
    Msg {
        name: "core.v1.TopologySpreadConstraint",
        fields: &[
            f(1, "maxSkew", I32, S, A),
            f(2, "topologyKey", Str, S, A),
            f(3, "whenUnsatisfiable", Str, S, A),
            f(4, "labelSelector", Msg(253), S, P),
            f(5, "minDomains", I32, S, P),
            f(6, "nodeAffinityPolicy", Str, S, P),
            f(7, "nodeTaintsPolicy", Str, S, P),
            f(8, "matchLabelKeys", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.EphemeralContainer",
        fields: &[
            f(1, "", Msg(452), I, O),
            f(2, "targetContainerName", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.PodOS",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "core.v1.PodSchedulingGate",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "core.v1.PodResourceClaim",
        fields: &[
            f(1, "name", Str, S, A),
            f(3, "resourceClaimName", Str, S, P),
            f(4, "resourceClaimTemplateName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.ResourceRequirements",
        fields: &[
            f(1, "limits", Quantity, M, O),
            f(2, "requests", Quantity, M, O),
            f(3, "claims", Msg(453), R, O),
        ],
    },
    Msg {
        name: "core.v1.PodSchedulingGroup",
        fields: &[f(1, "podGroupName", Str, S, P)],
    },
    Msg {
        name: "core.v1.PodCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastProbeTime", Time, S, O),
            f(4, "lastTransitionTime", Time, S, O),
            f(5, "reason", Str, S, O),
            f(6, "message", Str, S, O),
            f(7, "observedGeneration", I64, S, O),
        ],
    },
    Msg {
        name: "core.v1.ContainerStatus",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "state", Msg(454), S, O),
            f(3, "lastState", Msg(454), S, O),
            f(4, "ready", Bool, S, A),
            f(5, "restartCount", I32, S, A),
            f(6, "image", Str, S, A),
            f(7, "imageID", Str, S, A),
            f(8, "containerID", Str, S, O),
            f(9, "started", Bool, S, P),
            f(10, "allocatedResources", Quantity, M, O),
            f(11, "resources", Msg(334), S, P),
            f(12, "volumeMounts", Msg(455), R, O),
            f(13, "user", Msg(456), S, P),
            f(14, "allocatedResourcesStatus", Msg(457), R, O),
            f(15, "stopSignal", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PodIP",
        fields: &[f(1, "ip", Str, S, A)],
    },
    Msg {
        name: "core.v1.PodResourceClaimStatus",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "resourceClaimName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.HostIP",
        fields: &[f(1, "ip", Str, S, A)],
    },
    Msg {
        name: "core.v1.PodExtendedResourceClaimStatus",
        fields: &[
            f(1, "requestMappings", Msg(458), R, O),
            f(2, "resourceClaimName", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.NodeAllocatableResourceClaimStatus",
        fields: &[
            f(1, "resourceClaimName", Str, S, A),
            f(2, "containers", Str, R, O),
            f(3, "resources", Quantity, M, O),
        ],
    },
    Msg {
        name: "core.v1.ReplicationControllerCondition",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "status", Str, S, A),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.ScopeSelector",
        fields: &[f(1, "matchExpressions", Msg(459), R, O)],
    },
    Msg {
        name: "core.v1.ServicePort",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "protocol", Str, S, O),
            f(3, "port", I32, S, A),
            f(4, "targetPort", IntOrString, S, O),
            f(5, "nodePort", I32, S, O),
            f(6, "appProtocol", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.SessionAffinityConfig",
        fields: &[f(1, "clientIP", Msg(460), S, P)],
    },
    Msg {
        name: "core.v1.LoadBalancerStatus",
        fields: &[f(1, "ingress", Msg(461), R, O)],
    },
    Msg {
        name: "discovery.v1.EndpointConditions",
        fields: &[
            f(1, "ready", Bool, S, P),
            f(2, "serving", Bool, S, P),
            f(3, "terminating", Bool, S, P),
        ],
    },
    Msg {
        name: "discovery.v1.EndpointHints",
        fields: &[
            f(1, "forZones", Msg(462), R, O),
            f(2, "forNodes", Msg(463), R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfigurationReference",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.FlowDistinguisherMethod",
        fields: &[f(1, "type", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.PolicyRulesWithSubjects",
        fields: &[
            f(1, "subjects", Msg(464), R, O),
            f(2, "resourceRules", Msg(465), R, O),
            f(3, "nonResourceRules", Msg(466), R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.FlowSchemaCondition",
        fields: &[
            f(1, "type", Str, S, O),
            f(2, "status", Str, S, O),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.LimitedPriorityLevelConfiguration",
        fields: &[
            f(1, "nominalConcurrencyShares", I32, S, P),
            f(2, "limitResponse", Msg(467), S, O),
            f(3, "lendablePercent", I32, S, P),
            f(4, "borrowingLimitPercent", I32, S, P),
        ],
    },
    Msg {
        name: "flowcontrol.v1.ExemptPriorityLevelConfiguration",
        fields: &[
            f(1, "nominalConcurrencyShares", I32, S, P),
            f(2, "lendablePercent", I32, S, P),
        ],
    },
    Msg {
        name: "flowcontrol.v1.PriorityLevelConfigurationCondition",
        fields: &[
            f(1, "type", Str, S, O),
            f(2, "status", Str, S, O),
            f(3, "lastTransitionTime", Time, S, O),
            f(4, "reason", Str, S, O),
            f(5, "message", Str, S, O),
        ],
    },
    Msg {
        name: "meta.v1.StatusCause",
        fields: &[
            f(1, "reason", Str, S, O),
            f(2, "message", Str, S, O),
            f(3, "field", Str, S, O),
        ],
    },
    Msg {
        name: "networking.v1.ParentReference",
        fields: &[
            f(1, "group", Str, S, O),
            f(2, "resource", Str, S, O),
            f(3, "namespace", Str, S, O),
            f(4, "name", Str, S, O),
        ],
    },
    Msg {
        name: "networking.v1.IngressBackend",
        fields: &[
            f(3, "resource", Msg(317), S, P),
            f(4, "service", Msg(468), S, P),
        ],
    },
    Msg {
        name: "networking.v1.IngressTLS",
        fields: &[f(1, "hosts", Str, R, O), f(2, "secretName", Str, S, O)],
    },
    Msg {
        name: "networking.v1.IngressRule",
        fields: &[f(1, "host", Str, S, O), f(2, "", Msg(469), I, O)],
    },
    Msg {
        name: "networking.v1.IngressLoadBalancerStatus",
        fields: &[f(1, "ingress", Msg(470), R, O)],
    },
    Msg {
        name: "networking.v1.IngressClassParametersReference",
        fields: &[
            f(1, "apiGroup", Str, S, P),
            f(2, "kind", Str, S, A),
            f(3, "name", Str, S, A),
            f(4, "scope", Str, S, P),
            f(5, "namespace", Str, S, P),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicyIngressRule",
        fields: &[f(1, "ports", Msg(471), R, O), f(2, "from", Msg(472), R, O)],
    },
    Msg {
        name: "networking.v1.NetworkPolicyEgressRule",
        fields: &[f(1, "ports", Msg(471), R, O), f(2, "to", Msg(472), R, O)],
    },
    Msg {
        name: "resource.v1.DeviceSelector",
        fields: &[f(1, "cel", Msg(473), S, P)],
    },
    Msg {
        name: "resource.v1.DeviceClassConfiguration",
        fields: &[f(1, "", Msg(474), I, O)],
    },
    Msg {
        name: "resource.v1.DeviceClaim",
        fields: &[
            f(1, "requests", Msg(475), R, O),
            f(2, "constraints", Msg(476), R, O),
            f(3, "config", Msg(477), R, O),
        ],
    },
    Msg {
        name: "resource.v1.AllocationResult",
        fields: &[
            f(1, "devices", Msg(478), S, O),
            f(3, "nodeSelector", Msg(373), S, P),
            f(5, "allocationTimestamp", Time, S, P),
        ],
    },
    Msg {
        name: "resource.v1.ResourceClaimConsumerReference",
        fields: &[
            f(1, "apiGroup", Str, S, O),
            f(3, "resource", Str, S, A),
            f(4, "name", Str, S, A),
            f(5, "uid", Str, S, A),
        ],
    },
    Msg {
        name: "resource.v1.AllocatedDeviceStatus",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "pool", Str, S, A),
            f(3, "device", Str, S, A),
            f(4, "conditions", Msg(271), R, O),
            f(5, "data", RawExtension, S, P),
            f(6, "networkData", Msg(479), S, P),
            f(7, "shareID", Str, S, P),
        ],
    },
    Msg {
        name: "resource.v1.ResourcePool",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "generation", I64, S, A),
            f(3, "resourceSliceCount", I64, S, A),
        ],
    },
    Msg {
        name: "core.v1.NodeSelector",
        fields: &[f(1, "nodeSelectorTerms", Msg(480), R, O)],
    },
    Msg {
        name: "resource.v1.Device",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "attributes", Msg(481), M, O),
            f(3, "capacity", Msg(482), M, O),
            f(4, "consumesCounters", Msg(483), R, O),
            f(5, "nodeName", Str, S, P),
            f(6, "nodeSelector", Msg(373), S, P),
            f(7, "allNodes", Bool, S, P),
            f(8, "taints", Msg(484), R, O),
            f(9, "bindsToNode", Bool, S, P),
            f(10, "bindingConditions", Str, R, O),
            f(11, "bindingFailureConditions", Str, R, O),
            f(12, "allowMultipleAllocations", Bool, S, P),
            f(13, "nodeAllocatableResourceMappings", Msg(485), M, O),
        ],
    },
    Msg {
        name: "resource.v1.CounterSet",
        fields: &[f(1, "name", Str, S, A), f(2, "counters", Msg(486), M, O)],
    },
    Msg {
        name: "storage.v1.TokenRequest",
        fields: &[
            f(1, "audience", Str, S, A),
            f(2, "expirationSeconds", I64, S, P),
        ],
    },
    Msg {
        name: "storage.v1.CSINodeDriver",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "nodeID", Str, S, A),
            f(3, "topologyKeys", Str, R, O),
            f(4, "allocatable", Msg(487), S, P),
        ],
    },
    Msg {
        name: "meta.v1.LabelSelectorRequirement",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "operator", Str, S, A),
            f(3, "values", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.TopologySelectorLabelRequirement",
        fields: &[f(1, "key", Str, S, A), f(2, "values", Str, R, O)],
    },
    Msg {
        name: "storage.v1.VolumeAttachmentSource",
        fields: &[
            f(1, "persistentVolumeName", Str, S, P),
            f(2, "inlineVolumeSpec", Msg(205), S, P),
        ],
    },
    Msg {
        name: "storage.v1.VolumeError",
        fields: &[
            f(1, "time", Time, S, O),
            f(2, "message", Str, S, O),
            f(3, "errorCode", I32, S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.NamedRuleWithOperations",
        fields: &[f(1, "resourceNames", Str, R, O), f(2, "", Msg(267), I, O)],
    },
    Msg {
        name: "admissionregistration.v1.ApplyConfiguration",
        fields: &[f(1, "expression", Str, S, O)],
    },
    Msg {
        name: "admissionregistration.v1.JSONPatch",
        fields: &[f(1, "expression", Str, S, O)],
    },
    Msg {
        name: "admissionregistration.v1.ServiceReference",
        fields: &[
            f(1, "namespace", Str, S, A),
            f(2, "name", Str, S, A),
            f(3, "path", Str, S, P),
            f(4, "port", I32, S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.Rule",
        fields: &[
            f(1, "apiGroups", Str, R, O),
            f(2, "apiVersions", Str, R, O),
            f(3, "resources", Str, R, O),
            f(4, "scope", Str, S, P),
        ],
    },
    Msg {
        name: "admissionregistration.v1.ExpressionWarning",
        fields: &[f(2, "fieldRef", Str, S, A), f(3, "warning", Str, S, A)],
    },
    Msg {
        name: "apps.v1.RollingUpdateDaemonSet",
        fields: &[
            f(1, "maxUnavailable", IntOrString, S, P),
            f(2, "maxSurge", IntOrString, S, P),
        ],
    },
    Msg {
        name: "apps.v1.RollingUpdateDeployment",
        fields: &[
            f(1, "maxUnavailable", IntOrString, S, P),
            f(2, "maxSurge", IntOrString, S, P),
        ],
    },
    Msg {
        name: "apps.v1.RollingUpdateStatefulSetStrategy",
        fields: &[
            f(1, "partition", I32, S, P),
            f(2, "maxUnavailable", IntOrString, S, P),
        ],
    },
    Msg {
        name: "authorization.v1.FieldSelectorAttributes",
        fields: &[
            f(1, "rawSelector", Str, S, O),
            f(2, "requirements", Msg(488), R, O),
        ],
    },
    Msg {
        name: "authorization.v1.LabelSelectorAttributes",
        fields: &[
            f(1, "rawSelector", Str, S, O),
            f(2, "requirements", Msg(378), R, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.ObjectMetricSource",
        fields: &[
            f(1, "describedObject", Msg(288), S, A),
            f(2, "target", Msg(489), S, A),
            f(3, "metric", Msg(490), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.PodsMetricSource",
        fields: &[
            f(1, "metric", Msg(490), S, A),
            f(2, "target", Msg(489), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.ResourceMetricSource",
        fields: &[f(1, "name", Str, S, A), f(2, "target", Msg(489), S, A)],
    },
    Msg {
        name: "autoscaling.v2.ExternalMetricSource",
        fields: &[
            f(1, "metric", Msg(490), S, A),
            f(2, "target", Msg(489), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.ContainerResourceMetricSource",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "target", Msg(489), S, A),
            f(3, "container", Str, S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.HPAScalingRules",
        fields: &[
            f(1, "selectPolicy", Str, S, P),
            f(2, "policies", Msg(491), R, O),
            f(3, "stabilizationWindowSeconds", I32, S, P),
            f(4, "tolerance", Quantity, S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.ObjectMetricStatus",
        fields: &[
            f(1, "metric", Msg(490), S, A),
            f(2, "current", Msg(492), S, A),
            f(3, "describedObject", Msg(288), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.PodsMetricStatus",
        fields: &[
            f(1, "metric", Msg(490), S, A),
            f(2, "current", Msg(492), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.ResourceMetricStatus",
        fields: &[f(1, "name", Str, S, A), f(2, "current", Msg(492), S, A)],
    },
    Msg {
        name: "autoscaling.v2.ExternalMetricStatus",
        fields: &[
            f(1, "metric", Msg(490), S, A),
            f(2, "current", Msg(492), S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.ContainerResourceMetricStatus",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "current", Msg(492), S, A),
            f(3, "container", Str, S, A),
        ],
    },
    Msg {
        name: "batch.v1.PodFailurePolicyRule",
        fields: &[
            f(1, "action", Str, S, A),
            f(2, "onExitCodes", Msg(493), S, P),
            f(3, "onPodConditions", Msg(494), R, O),
        ],
    },
    Msg {
        name: "batch.v1.SuccessPolicyRule",
        fields: &[
            f(1, "succeededIndexes", Str, S, P),
            f(2, "succeededCount", I32, S, P),
        ],
    },
    Msg {
        name: "core.v1.ConfigMapNodeConfigSource",
        fields: &[
            f(1, "namespace", Str, S, A),
            f(2, "name", Str, S, A),
            f(3, "uid", Str, S, O),
            f(4, "resourceVersion", Str, S, O),
            f(5, "kubeletConfigKey", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.DaemonEndpoint",
        fields: &[f(1, "Port", I32, S, A)],
    },
    Msg {
        name: "core.v1.NodeSwapStatus",
        fields: &[f(1, "capacity", I64, S, P)],
    },
    Msg {
        name: "core.v1.NodeRuntimeHandlerFeatures",
        fields: &[
            f(1, "recursiveReadOnlyMounts", Bool, S, P),
            f(2, "userNamespaces", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.GCEPersistentDiskVolumeSource",
        fields: &[
            f(1, "pdName", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "partition", I32, S, O),
            f(4, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.AWSElasticBlockStoreVolumeSource",
        fields: &[
            f(1, "volumeID", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "partition", I32, S, O),
            f(4, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.HostPathVolumeSource",
        fields: &[f(1, "path", Str, S, A), f(2, "type", Str, S, P)],
    },
    Msg {
        name: "core.v1.GlusterfsPersistentVolumeSource",
        fields: &[
            f(1, "endpoints", Str, S, A),
            f(2, "path", Str, S, A),
            f(3, "readOnly", Bool, S, O),
            f(4, "endpointsNamespace", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.NFSVolumeSource",
        fields: &[
            f(1, "server", Str, S, A),
            f(2, "path", Str, S, A),
            f(3, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.RBDPersistentVolumeSource",
        fields: &[
            f(1, "monitors", Str, R, O),
            f(2, "image", Str, S, A),
            f(3, "fsType", Str, S, O),
            f(4, "pool", Str, S, O),
            f(5, "user", Str, S, O),
            f(6, "keyring", Str, S, O),
            f(7, "secretRef", Msg(495), S, P),
            f(8, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.ISCSIPersistentVolumeSource",
        fields: &[
            f(1, "targetPortal", Str, S, A),
            f(2, "iqn", Str, S, A),
            f(3, "lun", I32, S, A),
            f(4, "iscsiInterface", Str, S, O),
            f(5, "fsType", Str, S, O),
            f(6, "readOnly", Bool, S, O),
            f(7, "portals", Str, R, O),
            f(8, "chapAuthDiscovery", Bool, S, O),
            f(10, "secretRef", Msg(495), S, P),
            f(11, "chapAuthSession", Bool, S, O),
            f(12, "initiatorName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.CinderPersistentVolumeSource",
        fields: &[
            f(1, "volumeID", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "readOnly", Bool, S, O),
            f(4, "secretRef", Msg(495), S, P),
        ],
    },
    Msg {
        name: "core.v1.CephFSPersistentVolumeSource",
        fields: &[
            f(1, "monitors", Str, R, O),
            f(2, "path", Str, S, O),
            f(3, "user", Str, S, O),
            f(4, "secretFile", Str, S, O),
            f(5, "secretRef", Msg(495), S, P),
            f(6, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.FCVolumeSource",
        fields: &[
            f(1, "targetWWNs", Str, R, O),
            f(2, "lun", I32, S, P),
            f(3, "fsType", Str, S, O),
            f(4, "readOnly", Bool, S, O),
            f(5, "wwids", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.FlockerVolumeSource",
        fields: &[
            f(1, "datasetName", Str, S, O),
            f(2, "datasetUUID", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.FlexPersistentVolumeSource",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "secretRef", Msg(495), S, P),
            f(4, "readOnly", Bool, S, O),
            f(5, "options", Str, M, O),
        ],
    },
    Msg {
        name: "core.v1.AzureFilePersistentVolumeSource",
        fields: &[
            f(1, "secretName", Str, S, A),
            f(2, "shareName", Str, S, A),
            f(3, "readOnly", Bool, S, O),
            f(4, "secretNamespace", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.VsphereVirtualDiskVolumeSource",
        fields: &[
            f(1, "volumePath", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "storagePolicyName", Str, S, O),
            f(4, "storagePolicyID", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.QuobyteVolumeSource",
        fields: &[
            f(1, "registry", Str, S, A),
            f(2, "volume", Str, S, A),
            f(3, "readOnly", Bool, S, O),
            f(4, "user", Str, S, O),
            f(5, "group", Str, S, O),
            f(6, "tenant", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.AzureDiskVolumeSource",
        fields: &[
            f(1, "diskName", Str, S, A),
            f(2, "diskURI", Str, S, A),
            f(3, "cachingMode", Str, S, P),
            f(4, "fsType", Str, S, P),
            f(5, "readOnly", Bool, S, P),
            f(6, "kind", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PhotonPersistentDiskVolumeSource",
        fields: &[f(1, "pdID", Str, S, A), f(2, "fsType", Str, S, O)],
    },
    Msg {
        name: "core.v1.PortworxVolumeSource",
        fields: &[
            f(1, "volumeID", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.ScaleIOPersistentVolumeSource",
        fields: &[
            f(1, "gateway", Str, S, A),
            f(2, "system", Str, S, A),
            f(3, "secretRef", Msg(495), S, P),
            f(4, "sslEnabled", Bool, S, O),
            f(5, "protectionDomain", Str, S, O),
            f(6, "storagePool", Str, S, O),
            f(7, "storageMode", Str, S, O),
            f(8, "volumeName", Str, S, O),
            f(9, "fsType", Str, S, O),
            f(10, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.LocalVolumeSource",
        fields: &[f(1, "path", Str, S, A), f(2, "fsType", Str, S, P)],
    },
    Msg {
        name: "core.v1.StorageOSPersistentVolumeSource",
        fields: &[
            f(1, "volumeName", Str, S, O),
            f(2, "volumeNamespace", Str, S, O),
            f(3, "fsType", Str, S, O),
            f(4, "readOnly", Bool, S, O),
            f(5, "secretRef", Msg(195), S, P),
        ],
    },
    Msg {
        name: "core.v1.CSIPersistentVolumeSource",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "volumeHandle", Str, S, A),
            f(3, "readOnly", Bool, S, O),
            f(4, "fsType", Str, S, O),
            f(5, "volumeAttributes", Str, M, O),
            f(6, "controllerPublishSecretRef", Msg(495), S, P),
            f(7, "nodeStageSecretRef", Msg(495), S, P),
            f(8, "nodePublishSecretRef", Msg(495), S, P),
            f(9, "controllerExpandSecretRef", Msg(495), S, P),
            f(10, "nodeExpandSecretRef", Msg(495), S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeSource",
        fields: &[
            f(1, "hostPath", Msg(412), S, P),
            f(2, "emptyDir", Msg(496), S, P),
            f(3, "gcePersistentDisk", Msg(410), S, P),
            f(4, "awsElasticBlockStore", Msg(411), S, P),
            f(5, "gitRepo", Msg(497), S, P),
            f(6, "secret", Msg(498), S, P),
            f(7, "nfs", Msg(414), S, P),
            f(8, "iscsi", Msg(499), S, P),
            f(9, "glusterfs", Msg(500), S, P),
            f(10, "persistentVolumeClaim", Msg(501), S, P),
            f(11, "rbd", Msg(502), S, P),
            f(12, "flexVolume", Msg(503), S, P),
            f(13, "cinder", Msg(504), S, P),
            f(14, "cephfs", Msg(505), S, P),
            f(15, "flocker", Msg(420), S, P),
            f(16, "downwardAPI", Msg(506), S, P),
            f(17, "fc", Msg(419), S, P),
            f(18, "azureFile", Msg(507), S, P),
            f(19, "configMap", Msg(508), S, P),
            f(20, "vsphereVolume", Msg(423), S, P),
            f(21, "quobyte", Msg(424), S, P),
            f(22, "azureDisk", Msg(425), S, P),
            f(23, "photonPersistentDisk", Msg(426), S, P),
            f(24, "portworxVolume", Msg(427), S, P),
            f(25, "scaleIO", Msg(509), S, P),
            f(26, "projected", Msg(510), S, P),
            f(27, "storageos", Msg(511), S, P),
            f(28, "csi", Msg(512), S, P),
            f(29, "ephemeral", Msg(513), S, P),
            f(30, "image", Msg(514), S, P),
        ],
    },
    Msg {
        name: "core.v1.ContainerPort",
        fields: &[
            f(1, "name", Str, S, O),
            f(2, "hostPort", I32, S, O),
            f(3, "containerPort", I32, S, A),
            f(4, "protocol", Str, S, O),
            f(5, "hostIP", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.EnvVar",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "value", Str, S, O),
            f(3, "valueFrom", Msg(515), S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeMount",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "readOnly", Bool, S, O),
            f(3, "mountPath", Str, S, A),
            f(4, "subPath", Str, S, O),
            f(5, "mountPropagation", Str, S, P),
            f(6, "subPathExpr", Str, S, O),
            f(7, "recursiveReadOnly", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.Probe",
        fields: &[
            f(1, "", Msg(516), I, O),
            f(2, "initialDelaySeconds", I32, S, O),
            f(3, "timeoutSeconds", I32, S, O),
            f(4, "periodSeconds", I32, S, O),
            f(5, "successThreshold", I32, S, O),
            f(6, "failureThreshold", I32, S, O),
            f(7, "terminationGracePeriodSeconds", I64, S, P),
        ],
    },
    Msg {
        name: "core.v1.Lifecycle",
        fields: &[
            f(1, "postStart", Msg(517), S, P),
            f(2, "preStop", Msg(517), S, P),
            f(3, "stopSignal", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.SecurityContext",
        fields: &[
            f(1, "capabilities", Msg(518), S, P),
            f(2, "privileged", Bool, S, P),
            f(3, "seLinuxOptions", Msg(443), S, P),
            f(4, "runAsUser", I64, S, P),
            f(5, "runAsNonRoot", Bool, S, P),
            f(6, "readOnlyRootFilesystem", Bool, S, P),
            f(7, "allowPrivilegeEscalation", Bool, S, P),
            f(8, "runAsGroup", I64, S, P),
            f(9, "procMount", Str, S, P),
            f(10, "windowsOptions", Msg(445), S, P),
            f(11, "seccompProfile", Msg(446), S, P),
            f(12, "appArmorProfile", Msg(447), S, P),
        ],
    },
    Msg {
        name: "core.v1.EnvFromSource",
        fields: &[
            f(1, "prefix", Str, S, O),
            f(2, "configMapRef", Msg(519), S, P),
            f(3, "secretRef", Msg(520), S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeDevice",
        fields: &[f(1, "name", Str, S, A), f(2, "devicePath", Str, S, A)],
    },
    Msg {
        name: "core.v1.ContainerResizePolicy",
        fields: &[
            f(1, "resourceName", Str, S, A),
            f(2, "restartPolicy", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.ContainerRestartRule",
        fields: &[f(1, "action", Str, S, O), f(2, "exitCodes", Msg(521), S, P)],
    },
    Msg {
        name: "core.v1.SELinuxOptions",
        fields: &[
            f(1, "user", Str, S, O),
            f(2, "role", Str, S, O),
            f(3, "type", Str, S, O),
            f(4, "level", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.Sysctl",
        fields: &[f(1, "name", Str, S, A), f(2, "value", Str, S, A)],
    },
    Msg {
        name: "core.v1.WindowsSecurityContextOptions",
        fields: &[
            f(1, "gmsaCredentialSpecName", Str, S, P),
            f(2, "gmsaCredentialSpec", Str, S, P),
            f(3, "runAsUserName", Str, S, P),
            f(4, "hostProcess", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.SeccompProfile",
        fields: &[f(1, "type", Str, S, A), f(2, "localhostProfile", Str, S, P)],
    },
    Msg {
        name: "core.v1.AppArmorProfile",
        fields: &[f(1, "type", Str, S, A), f(2, "localhostProfile", Str, S, P)],
    },
    Msg {
        name: "core.v1.NodeAffinity",
        fields: &[
            f(
                1,
                "requiredDuringSchedulingIgnoredDuringExecution",
                Msg(373),
                S,
                P,
            ),
            f(
                2,
                "preferredDuringSchedulingIgnoredDuringExecution",
                Msg(522),
                R,
                O,
            ),
        ],
    },
    Msg {
        name: "core.v1.PodAffinity",
        fields: &[
            f(
                1,
                "requiredDuringSchedulingIgnoredDuringExecution",
                Msg(523),
                R,
                O,
            ),
            f(
                2,
                "preferredDuringSchedulingIgnoredDuringExecution",
                Msg(524),
                R,
                O,
            ),
        ],
    },
    Msg {
        name: "core.v1.PodAntiAffinity",
        fields: &[
            f(
                1,
                "requiredDuringSchedulingIgnoredDuringExecution",
                Msg(523),
                R,
                O,
            ),
            f(
                2,
                "preferredDuringSchedulingIgnoredDuringExecution",
                Msg(524),
                R,
                O,
            ),
        ],
    },
    Msg {
        name: "core.v1.PodDNSConfigOption",
        fields: &[f(1, "name", Str, S, O), f(2, "value", Str, S, P)],
    },
    Msg {
        name: "core.v1.EphemeralContainerCommon",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "image", Str, S, O),
            f(3, "command", Str, R, O),
            f(4, "args", Str, R, O),
            f(5, "workingDir", Str, S, O),
            f(6, "ports", Msg(433), R, O),
            f(7, "env", Msg(434), R, O),
            f(8, "resources", Msg(334), S, O),
            f(9, "volumeMounts", Msg(435), R, O),
            f(10, "livenessProbe", Msg(436), S, P),
            f(11, "readinessProbe", Msg(436), S, P),
            f(12, "lifecycle", Msg(437), S, P),
            f(13, "terminationMessagePath", Str, S, O),
            f(14, "imagePullPolicy", Str, S, O),
            f(15, "securityContext", Msg(438), S, P),
            f(16, "stdin", Bool, S, O),
            f(17, "stdinOnce", Bool, S, O),
            f(18, "tty", Bool, S, O),
            f(19, "envFrom", Msg(439), R, O),
            f(20, "terminationMessagePolicy", Str, S, O),
            f(21, "volumeDevices", Msg(440), R, O),
            f(22, "startupProbe", Msg(436), S, P),
            f(23, "resizePolicy", Msg(441), R, O),
            f(24, "restartPolicy", Str, S, P),
            f(25, "restartPolicyRules", Msg(442), R, O),
        ],
    },
    Msg {
        name: "core.v1.ResourceClaim",
        fields: &[f(1, "name", Str, S, A), f(2, "request", Str, S, O)],
    },
    Msg {
        name: "core.v1.ContainerState",
        fields: &[
            f(1, "waiting", Msg(525), S, P),
            f(2, "running", Msg(526), S, P),
            f(3, "terminated", Msg(527), S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeMountStatus",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "mountPath", Str, S, A),
            f(3, "readOnly", Bool, S, O),
            f(4, "recursiveReadOnly", Str, S, P),
            f(5, "volumeStatus", Msg(528), S, P),
        ],
    },
    Msg {
        name: "core.v1.ContainerUser",
        fields: &[f(1, "linux", Msg(529), S, P)],
    },
    Msg {
        name: "core.v1.ResourceStatus",
        fields: &[f(1, "name", Str, S, A), f(2, "resources", Msg(530), R, O)],
    },
    Msg {
        name: "core.v1.ContainerExtendedResourceRequest",
        fields: &[
            f(1, "containerName", Str, S, A),
            f(2, "resourceName", Str, S, A),
            f(3, "requestName", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.ScopedResourceSelectorRequirement",
        fields: &[
            f(1, "scopeName", Str, S, A),
            f(2, "operator", Str, S, A),
            f(3, "values", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.ClientIPConfig",
        fields: &[f(1, "timeoutSeconds", I32, S, P)],
    },
    Msg {
        name: "core.v1.LoadBalancerIngress",
        fields: &[
            f(1, "ip", Str, S, O),
            f(2, "hostname", Str, S, O),
            f(3, "ipMode", Str, S, P),
            f(4, "ports", Msg(531), R, O),
        ],
    },
    Msg {
        name: "discovery.v1.ForZone",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "discovery.v1.ForNode",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.Subject",
        fields: &[
            f(1, "kind", Str, S, A),
            f(2, "user", Msg(532), S, P),
            f(3, "group", Msg(533), S, P),
            f(4, "serviceAccount", Msg(534), S, P),
        ],
    },
    Msg {
        name: "flowcontrol.v1.ResourcePolicyRule",
        fields: &[
            f(1, "verbs", Str, R, O),
            f(2, "apiGroups", Str, R, O),
            f(3, "resources", Str, R, O),
            f(4, "clusterScope", Bool, S, O),
            f(5, "namespaces", Str, R, O),
        ],
    },
    Msg {
        name: "flowcontrol.v1.NonResourcePolicyRule",
        fields: &[f(1, "verbs", Str, R, O), f(6, "nonResourceURLs", Str, R, O)],
    },
    Msg {
        name: "flowcontrol.v1.LimitResponse",
        fields: &[f(1, "type", Str, S, A), f(2, "queuing", Msg(535), S, P)],
    },
    Msg {
        name: "networking.v1.IngressServiceBackend",
        fields: &[f(1, "name", Str, S, A), f(2, "port", Msg(536), S, O)],
    },
    Msg {
        name: "networking.v1.IngressRuleValue",
        fields: &[f(1, "http", Msg(537), S, P)],
    },
    Msg {
        name: "networking.v1.IngressLoadBalancerIngress",
        fields: &[
            f(1, "ip", Str, S, O),
            f(2, "hostname", Str, S, O),
            f(4, "ports", Msg(538), R, O),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicyPort",
        fields: &[
            f(1, "protocol", Str, S, P),
            f(2, "port", IntOrString, S, P),
            f(3, "endPort", I32, S, P),
        ],
    },
    Msg {
        name: "networking.v1.NetworkPolicyPeer",
        fields: &[
            f(1, "podSelector", Msg(253), S, P),
            f(2, "namespaceSelector", Msg(253), S, P),
            f(3, "ipBlock", Msg(539), S, P),
        ],
    },
    Msg {
        name: "resource.v1.CELDeviceSelector",
        fields: &[f(1, "expression", Str, S, A)],
    },
    Msg {
        name: "resource.v1.DeviceConfiguration",
        fields: &[f(1, "opaque", Msg(540), S, P)],
    },
    Msg {
        name: "resource.v1.DeviceRequest",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "exactly", Msg(541), S, P),
            f(3, "firstAvailable", Msg(542), R, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceConstraint",
        fields: &[
            f(1, "requests", Str, R, O),
            f(2, "matchAttribute", Str, S, P),
            f(3, "distinctAttribute", Str, S, P),
        ],
    },
    Msg {
        name: "resource.v1.DeviceClaimConfiguration",
        fields: &[f(1, "requests", Str, R, O), f(2, "", Msg(474), I, O)],
    },
    Msg {
        name: "resource.v1.DeviceAllocationResult",
        fields: &[
            f(1, "results", Msg(543), R, O),
            f(2, "config", Msg(544), R, O),
        ],
    },
    Msg {
        name: "resource.v1.NetworkDeviceData",
        fields: &[
            f(1, "interfaceName", Str, S, O),
            f(2, "ips", Str, R, O),
            f(3, "hardwareAddress", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.NodeSelectorTerm",
        fields: &[
            f(1, "matchExpressions", Msg(545), R, O),
            f(2, "matchFields", Msg(545), R, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceAttribute",
        fields: &[
            f(2, "int", I64, S, P),
            f(3, "bool", Bool, S, P),
            f(4, "string", Str, S, P),
            f(5, "version", Str, S, P),
            f(6, "ints", I64, R, O),
            f(7, "bools", Bool, R, O),
            f(8, "strings", Str, R, O),
            f(9, "versions", Str, R, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceCapacity",
        fields: &[
            f(1, "value", Quantity, S, A),
            f(2, "requestPolicy", Msg(546), S, P),
        ],
    },
    Msg {
        name: "resource.v1.DeviceCounterConsumption",
        fields: &[
            f(1, "counterSet", Str, S, A),
            f(2, "counters", Msg(486), M, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceTaint",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "value", Str, S, O),
            f(3, "effect", Str, S, A),
            f(4, "timeAdded", Time, S, P),
        ],
    },
    Msg {
        name: "resource.v1.NodeAllocatableResourceMapping",
        fields: &[
            f(1, "capacityKey", Str, S, P),
            f(2, "allocationMultiplier", Quantity, S, P),
        ],
    },
    Msg {
        name: "resource.v1.Counter",
        fields: &[f(1, "value", Quantity, S, A)],
    },
    Msg {
        name: "storage.v1.VolumeNodeResources",
        fields: &[f(1, "count", I32, S, P)],
    },
    Msg {
        name: "meta.v1.FieldSelectorRequirement",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "operator", Str, S, A),
            f(3, "values", Str, R, O),
        ],
    },
    Msg {
        name: "autoscaling.v2.MetricTarget",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "value", Quantity, S, P),
            f(3, "averageValue", Quantity, S, P),
            f(4, "averageUtilization", I32, S, P),
        ],
    },
    Msg {
        name: "autoscaling.v2.MetricIdentifier",
        fields: &[f(1, "name", Str, S, A), f(2, "selector", Msg(253), S, P)],
    },
    Msg {
        name: "autoscaling.v2.HPAScalingPolicy",
        fields: &[
            f(1, "type", Str, S, A),
            f(2, "value", I32, S, A),
            f(3, "periodSeconds", I32, S, A),
        ],
    },
    Msg {
        name: "autoscaling.v2.MetricValueStatus",
        fields: &[
            f(1, "value", Quantity, S, P),
            f(2, "averageValue", Quantity, S, P),
            f(3, "averageUtilization", I32, S, P),
        ],
    },
    Msg {
        name: "batch.v1.PodFailurePolicyOnExitCodesRequirement",
        fields: &[
            f(1, "containerName", Str, S, P),
            f(2, "operator", Str, S, A),
            f(3, "values", I32, R, O),
        ],
    },
    Msg {
        name: "batch.v1.PodFailurePolicyOnPodConditionsPattern",
        fields: &[f(1, "type", Str, S, A), f(2, "status", Str, S, A)],
    },
    Msg {
        name: "core.v1.SecretReference",
        fields: &[f(1, "name", Str, S, O), f(2, "namespace", Str, S, O)],
    },
    Msg {
        name: "core.v1.EmptyDirVolumeSource",
        fields: &[f(1, "medium", Str, S, O), f(2, "sizeLimit", Quantity, S, P)],
    },
    Msg {
        name: "core.v1.GitRepoVolumeSource",
        fields: &[
            f(1, "repository", Str, S, A),
            f(2, "revision", Str, S, O),
            f(3, "directory", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.SecretVolumeSource",
        fields: &[
            f(1, "secretName", Str, S, O),
            f(2, "items", Msg(547), R, O),
            f(3, "defaultMode", I32, S, P),
            f(4, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ISCSIVolumeSource",
        fields: &[
            f(1, "targetPortal", Str, S, A),
            f(2, "iqn", Str, S, A),
            f(3, "lun", I32, S, A),
            f(4, "iscsiInterface", Str, S, O),
            f(5, "fsType", Str, S, O),
            f(6, "readOnly", Bool, S, O),
            f(7, "portals", Str, R, O),
            f(8, "chapAuthDiscovery", Bool, S, O),
            f(10, "secretRef", Msg(218), S, P),
            f(11, "chapAuthSession", Bool, S, O),
            f(12, "initiatorName", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.GlusterfsVolumeSource",
        fields: &[
            f(1, "endpoints", Str, S, A),
            f(2, "path", Str, S, A),
            f(3, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimVolumeSource",
        fields: &[f(1, "claimName", Str, S, A), f(2, "readOnly", Bool, S, O)],
    },
    Msg {
        name: "core.v1.RBDVolumeSource",
        fields: &[
            f(1, "monitors", Str, R, O),
            f(2, "image", Str, S, A),
            f(3, "fsType", Str, S, O),
            f(4, "pool", Str, S, O),
            f(5, "user", Str, S, O),
            f(6, "keyring", Str, S, O),
            f(7, "secretRef", Msg(218), S, P),
            f(8, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.FlexVolumeSource",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "secretRef", Msg(218), S, P),
            f(4, "readOnly", Bool, S, O),
            f(5, "options", Str, M, O),
        ],
    },
    Msg {
        name: "core.v1.CinderVolumeSource",
        fields: &[
            f(1, "volumeID", Str, S, A),
            f(2, "fsType", Str, S, O),
            f(3, "readOnly", Bool, S, O),
            f(4, "secretRef", Msg(218), S, P),
        ],
    },
    Msg {
        name: "core.v1.CephFSVolumeSource",
        fields: &[
            f(1, "monitors", Str, R, O),
            f(2, "path", Str, S, O),
            f(3, "user", Str, S, O),
            f(4, "secretFile", Str, S, O),
            f(5, "secretRef", Msg(218), S, P),
            f(6, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.DownwardAPIVolumeSource",
        fields: &[
            f(1, "items", Msg(548), R, O),
            f(2, "defaultMode", I32, S, P),
        ],
    },
    Msg {
        name: "core.v1.AzureFileVolumeSource",
        fields: &[
            f(1, "secretName", Str, S, A),
            f(2, "shareName", Str, S, A),
            f(3, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.ConfigMapVolumeSource",
        fields: &[
            f(1, "", Msg(218), I, O),
            f(2, "items", Msg(547), R, O),
            f(3, "defaultMode", I32, S, P),
            f(4, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ScaleIOVolumeSource",
        fields: &[
            f(1, "gateway", Str, S, A),
            f(2, "system", Str, S, A),
            f(3, "secretRef", Msg(218), S, P),
            f(4, "sslEnabled", Bool, S, O),
            f(5, "protectionDomain", Str, S, O),
            f(6, "storagePool", Str, S, O),
            f(7, "storageMode", Str, S, O),
            f(8, "volumeName", Str, S, O),
            f(9, "fsType", Str, S, O),
            f(10, "readOnly", Bool, S, O),
        ],
    },
    Msg {
        name: "core.v1.ProjectedVolumeSource",
        fields: &[
            f(1, "sources", Msg(549), R, O),
            f(2, "defaultMode", I32, S, P),
        ],
    },
    Msg {
        name: "core.v1.StorageOSVolumeSource",
        fields: &[
            f(1, "volumeName", Str, S, O),
            f(2, "volumeNamespace", Str, S, O),
            f(3, "fsType", Str, S, O),
            f(4, "readOnly", Bool, S, O),
            f(5, "secretRef", Msg(218), S, P),
        ],
    },
    Msg {
        name: "core.v1.CSIVolumeSource",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "readOnly", Bool, S, P),
            f(3, "fsType", Str, S, P),
            f(4, "volumeAttributes", Str, M, O),
            f(5, "nodePublishSecretRef", Msg(218), S, P),
        ],
    },
    Msg {
        name: "core.v1.EphemeralVolumeSource",
        fields: &[f(1, "volumeClaimTemplate", Msg(550), S, P)],
    },
    Msg {
        name: "core.v1.ImageVolumeSource",
        fields: &[f(1, "reference", Str, S, O), f(2, "pullPolicy", Str, S, O)],
    },
    Msg {
        name: "core.v1.EnvVarSource",
        fields: &[
            f(1, "fieldRef", Msg(551), S, P),
            f(2, "resourceFieldRef", Msg(552), S, P),
            f(3, "configMapKeyRef", Msg(553), S, P),
            f(4, "secretKeyRef", Msg(554), S, P),
            f(5, "fileKeyRef", Msg(555), S, P),
        ],
    },
    Msg {
        name: "core.v1.ProbeHandler",
        fields: &[
            f(1, "exec", Msg(556), S, P),
            f(2, "httpGet", Msg(557), S, P),
            f(3, "tcpSocket", Msg(558), S, P),
            f(4, "grpc", Msg(559), S, P),
        ],
    },
    Msg {
        name: "core.v1.LifecycleHandler",
        fields: &[
            f(1, "exec", Msg(556), S, P),
            f(2, "httpGet", Msg(557), S, P),
            f(3, "tcpSocket", Msg(558), S, P),
            f(4, "sleep", Msg(560), S, P),
        ],
    },
    Msg {
        name: "core.v1.Capabilities",
        fields: &[f(1, "add", Str, R, O), f(2, "drop", Str, R, O)],
    },
    Msg {
        name: "core.v1.ConfigMapEnvSource",
        fields: &[f(1, "", Msg(218), I, O), f(2, "optional", Bool, S, P)],
    },
    Msg {
        name: "core.v1.SecretEnvSource",
        fields: &[f(1, "", Msg(218), I, O), f(2, "optional", Bool, S, P)],
    },
    Msg {
        name: "core.v1.ContainerRestartRuleOnExitCodes",
        fields: &[f(1, "operator", Str, S, O), f(2, "values", I32, R, O)],
    },
    Msg {
        name: "core.v1.PreferredSchedulingTerm",
        fields: &[
            f(1, "weight", I32, S, A),
            f(2, "preference", Msg(480), S, A),
        ],
    },
    Msg {
        name: "core.v1.PodAffinityTerm",
        fields: &[
            f(1, "labelSelector", Msg(253), S, P),
            f(2, "namespaces", Str, R, O),
            f(3, "topologyKey", Str, S, A),
            f(4, "namespaceSelector", Msg(253), S, P),
            f(5, "matchLabelKeys", Str, R, O),
            f(6, "mismatchLabelKeys", Str, R, O),
        ],
    },
    Msg {
        name: "core.v1.WeightedPodAffinityTerm",
        fields: &[
            f(1, "weight", I32, S, A),
            f(2, "podAffinityTerm", Msg(523), S, A),
        ],
    },
    Msg {
        name: "core.v1.ContainerStateWaiting",
        fields: &[f(1, "reason", Str, S, O), f(2, "message", Str, S, O)],
    },
    Msg {
        name: "core.v1.ContainerStateRunning",
        fields: &[f(1, "startedAt", Time, S, O)],
    },
    Msg {
        name: "core.v1.ContainerStateTerminated",
        fields: &[
            f(1, "exitCode", I32, S, A),
            f(2, "signal", I32, S, O),
            f(3, "reason", Str, S, O),
            f(4, "message", Str, S, O),
            f(5, "startedAt", Time, S, O),
            f(6, "finishedAt", Time, S, O),
            f(7, "containerID", Str, S, O),
        ],
    },
    Msg {
        name: "core.v1.VolumeStatus",
        fields: &[f(1, "image", Msg(561), S, P)],
    },
    Msg {
        name: "core.v1.LinuxContainerUser",
        fields: &[
            f(1, "uid", I64, S, A),
            f(2, "gid", I64, S, A),
            f(3, "supplementalGroups", I64, R, O),
        ],
    },
    Msg {
        name: "core.v1.ResourceHealth",
        fields: &[
            f(1, "resourceID", Str, S, A),
            f(2, "health", Str, S, O),
            f(6, "message", Str, S, P),
        ],
    },
    Msg {
        name: "core.v1.PortStatus",
        fields: &[
            f(1, "port", I32, S, A),
            f(2, "protocol", Str, S, A),
            f(3, "error", Str, S, P),
        ],
    },
    Msg {
        name: "flowcontrol.v1.UserSubject",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.GroupSubject",
        fields: &[f(1, "name", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.ServiceAccountSubject",
        fields: &[f(1, "namespace", Str, S, A), f(2, "name", Str, S, A)],
    },
    Msg {
        name: "flowcontrol.v1.QueuingConfiguration",
        fields: &[
            f(1, "queues", I32, S, A),
            f(2, "handSize", I32, S, A),
            f(3, "queueLengthLimit", I32, S, A),
        ],
    },
    Msg {
        name: "networking.v1.ServiceBackendPort",
        fields: &[f(1, "name", Str, S, O), f(2, "number", I32, S, O)],
    },
    Msg {
        name: "networking.v1.HTTPIngressRuleValue",
        fields: &[f(1, "paths", Msg(562), R, O)],
    },
    Msg {
        name: "networking.v1.IngressPortStatus",
        fields: &[
            f(1, "port", I32, S, A),
            f(2, "protocol", Str, S, A),
            f(3, "error", Str, S, P),
        ],
    },
    Msg {
        name: "networking.v1.IPBlock",
        fields: &[f(1, "cidr", Str, S, A), f(2, "except", Str, R, O)],
    },
    Msg {
        name: "resource.v1.OpaqueDeviceConfiguration",
        fields: &[
            f(1, "driver", Str, S, A),
            f(2, "parameters", RawExtension, S, A),
        ],
    },
    Msg {
        name: "resource.v1.ExactDeviceRequest",
        fields: &[
            f(1, "deviceClassName", Str, S, A),
            f(2, "selectors", Msg(366), R, O),
            f(3, "allocationMode", Str, S, O),
            f(4, "count", I64, S, O),
            f(5, "adminAccess", Bool, S, P),
            f(6, "tolerations", Msg(563), R, O),
            f(7, "capacity", Msg(564), S, P),
        ],
    },
    Msg {
        name: "resource.v1.DeviceSubRequest",
        fields: &[
            f(1, "name", Str, S, A),
            f(2, "deviceClassName", Str, S, A),
            f(3, "selectors", Msg(366), R, O),
            f(4, "allocationMode", Str, S, O),
            f(5, "count", I64, S, O),
            f(6, "tolerations", Msg(563), R, O),
            f(7, "capacity", Msg(564), S, P),
        ],
    },
    Msg {
        name: "resource.v1.DeviceRequestAllocationResult",
        fields: &[
            f(1, "request", Str, S, A),
            f(2, "driver", Str, S, A),
            f(3, "pool", Str, S, A),
            f(4, "device", Str, S, A),
            f(5, "adminAccess", Bool, S, P),
            f(6, "tolerations", Msg(563), R, O),
            f(7, "bindingConditions", Str, R, O),
            f(8, "bindingFailureConditions", Str, R, O),
            f(9, "shareID", Str, S, P),
            f(10, "consumedCapacity", Quantity, M, O),
        ],
    },
    Msg {
        name: "resource.v1.DeviceAllocationConfiguration",
        fields: &[
            f(1, "source", Str, S, A),
            f(2, "requests", Str, R, O),
            f(3, "", Msg(474), I, O),
        ],
    },
    Msg {
        name: "core.v1.NodeSelectorRequirement",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "operator", Str, S, A),
            f(3, "values", Str, R, O),
        ],
    },
    Msg {
        name: "resource.v1.CapacityRequestPolicy",
        fields: &[
            f(1, "default", Quantity, S, P),
            f(3, "validValues", Quantity, R, O),
            f(4, "validRange", Msg(565), S, P),
        ],
    },
    Msg {
        name: "core.v1.KeyToPath",
        fields: &[
            f(1, "key", Str, S, A),
            f(2, "path", Str, S, A),
            f(3, "mode", I32, S, P),
        ],
    },
    Msg {
        name: "core.v1.DownwardAPIVolumeFile",
        fields: &[
            f(1, "path", Str, S, A),
            f(2, "fieldRef", Msg(551), S, P),
            f(3, "resourceFieldRef", Msg(552), S, P),
            f(4, "mode", I32, S, P),
        ],
    },
    Msg {
        name: "core.v1.VolumeProjection",
        fields: &[
            f(1, "secret", Msg(566), S, P),
            f(2, "downwardAPI", Msg(567), S, P),
            f(3, "configMap", Msg(568), S, P),
            f(4, "serviceAccountToken", Msg(569), S, P),
            f(5, "clusterTrustBundle", Msg(570), S, P),
            f(6, "podCertificate", Msg(571), S, P),
        ],
    },
    Msg {
        name: "core.v1.PersistentVolumeClaimTemplate",
        fields: &[
            f(1, "metadata", Msg(155), S, O),
            f(2, "spec", Msg(207), S, A),
        ],
    },
    Msg {
        name: "core.v1.ObjectFieldSelector",
        fields: &[f(1, "apiVersion", Str, S, O), f(2, "fieldPath", Str, S, A)],
    },
    Msg {
        name: "core.v1.ResourceFieldSelector",
        fields: &[
            f(1, "containerName", Str, S, O),
            f(2, "resource", Str, S, A),
            f(3, "divisor", Quantity, S, O),
        ],
    },
    Msg {
        name: "core.v1.ConfigMapKeySelector",
        fields: &[
            f(1, "", Msg(218), I, O),
            f(2, "key", Str, S, A),
            f(3, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.SecretKeySelector",
        fields: &[
            f(1, "", Msg(218), I, O),
            f(2, "key", Str, S, A),
            f(3, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.FileKeySelector",
        fields: &[
            f(1, "volumeName", Str, S, A),
            f(2, "path", Str, S, A),
            f(3, "key", Str, S, A),
            f(4, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ExecAction",
        fields: &[f(1, "command", Str, R, O)],
    },
    Msg {
        name: "core.v1.HTTPGetAction",
        fields: &[
            f(1, "path", Str, S, O),
            f(2, "port", IntOrString, S, A),
            f(3, "host", Str, S, O),
            f(4, "scheme", Str, S, O),
            f(5, "httpHeaders", Msg(572), R, O),
        ],
    },
    Msg {
        name: "core.v1.TCPSocketAction",
        fields: &[f(1, "port", IntOrString, S, A), f(2, "host", Str, S, O)],
    },
    Msg {
        name: "core.v1.GRPCAction",
        fields: &[f(1, "port", I32, S, A), f(2, "service", Str, S, P)],
    },
    Msg {
        name: "core.v1.SleepAction",
        fields: &[f(1, "seconds", I64, S, A)],
    },
    Msg {
        name: "core.v1.ImageVolumeStatus",
        fields: &[f(1, "imageRef", Str, S, O)],
    },
    Msg {
        name: "networking.v1.HTTPIngressPath",
        fields: &[
            f(1, "path", Str, S, O),
            f(2, "backend", Msg(359), S, A),
            f(3, "pathType", Str, S, P),
        ],
    },
    Msg {
        name: "resource.v1.DeviceToleration",
        fields: &[
            f(1, "key", Str, S, O),
            f(2, "operator", Str, S, O),
            f(3, "value", Str, S, O),
            f(4, "effect", Str, S, O),
            f(5, "tolerationSeconds", I64, S, P),
        ],
    },
    Msg {
        name: "resource.v1.CapacityRequirements",
        fields: &[f(1, "requests", Quantity, M, O)],
    },
    Msg {
        name: "resource.v1.CapacityRequestPolicyRange",
        fields: &[
            f(1, "min", Quantity, S, P),
            f(2, "max", Quantity, S, P),
            f(3, "step", Quantity, S, P),
        ],
    },
    Msg {
        name: "core.v1.SecretProjection",
        fields: &[
            f(1, "", Msg(218), I, O),
            f(2, "items", Msg(547), R, O),
            f(4, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.DownwardAPIProjection",
        fields: &[f(1, "items", Msg(548), R, O)],
    },
    Msg {
        name: "core.v1.ConfigMapProjection",
        fields: &[
            f(1, "", Msg(218), I, O),
            f(2, "items", Msg(547), R, O),
            f(4, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.ServiceAccountTokenProjection",
        fields: &[
            f(1, "audience", Str, S, O),
            f(2, "expirationSeconds", I64, S, P),
            f(3, "path", Str, S, A),
        ],
    },
    Msg {
        name: "core.v1.ClusterTrustBundleProjection",
        fields: &[
            f(1, "name", Str, S, P),
            f(2, "signerName", Str, S, P),
            f(3, "labelSelector", Msg(253), S, P),
            f(4, "path", Str, S, A),
            f(5, "optional", Bool, S, P),
        ],
    },
    Msg {
        name: "core.v1.PodCertificateProjection",
        fields: &[
            f(1, "signerName", Str, S, O),
            f(2, "keyType", Str, S, O),
            f(3, "maxExpirationSeconds", I32, S, P),
            f(4, "credentialBundlePath", Str, S, O),
            f(5, "keyPath", Str, S, O),
            f(6, "certificateChainPath", Str, S, O),
            f(7, "userAnnotations", Str, M, O),
        ],
    },
    Msg {
        name: "core.v1.HTTPHeader",
        fields: &[f(1, "name", Str, S, A), f(2, "value", Str, S, A)],
    },
];

/// Top-level kinds, sorted by (apiVersion, kind): index into `MESSAGES`.
pub(super) static KINDS: &[(&str, &str, u16)] = &[
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicy",
        0,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyBinding",
        1,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyBindingList",
        2,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingAdmissionPolicyList",
        3,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        4,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfigurationList",
        5,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicy",
        6,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBinding",
        7,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyBindingList",
        8,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingAdmissionPolicyList",
        9,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        10,
    ),
    (
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfigurationList",
        11,
    ),
    ("apps/v1", "ControllerRevision", 12),
    ("apps/v1", "ControllerRevisionList", 13),
    ("apps/v1", "DaemonSet", 14),
    ("apps/v1", "DaemonSetList", 15),
    ("apps/v1", "Deployment", 16),
    ("apps/v1", "DeploymentList", 17),
    ("apps/v1", "ReplicaSet", 18),
    ("apps/v1", "ReplicaSetList", 19),
    ("apps/v1", "StatefulSet", 20),
    ("apps/v1", "StatefulSetList", 21),
    ("authentication.k8s.io/v1", "SelfSubjectReview", 22),
    ("authentication.k8s.io/v1", "TokenRequest", 23),
    ("authentication.k8s.io/v1", "TokenReview", 24),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", 25),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", 26),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", 27),
    ("authorization.k8s.io/v1", "SubjectAccessReview", 28),
    ("autoscaling/v1", "HorizontalPodAutoscaler", 29),
    ("autoscaling/v1", "HorizontalPodAutoscalerList", 30),
    ("autoscaling/v1", "Scale", 31),
    ("autoscaling/v2", "HorizontalPodAutoscaler", 32),
    ("autoscaling/v2", "HorizontalPodAutoscalerList", 33),
    ("batch/v1", "CronJob", 34),
    ("batch/v1", "CronJobList", 35),
    ("batch/v1", "Job", 36),
    ("batch/v1", "JobList", 37),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", 38),
    (
        "certificates.k8s.io/v1",
        "CertificateSigningRequestList",
        39,
    ),
    ("coordination.k8s.io/v1", "Lease", 40),
    ("coordination.k8s.io/v1", "LeaseList", 41),
    ("discovery.k8s.io/v1", "EndpointSlice", 85),
    ("discovery.k8s.io/v1", "EndpointSliceList", 86),
    ("events.k8s.io/v1", "Event", 87),
    ("events.k8s.io/v1", "EventList", 88),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", 89),
    ("flowcontrol.apiserver.k8s.io/v1", "FlowSchemaList", 90),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfiguration",
        91,
    ),
    (
        "flowcontrol.apiserver.k8s.io/v1",
        "PriorityLevelConfigurationList",
        92,
    ),
    ("meta.k8s.io/v1", "APIGroup", 93),
    ("meta.k8s.io/v1", "APIGroupList", 94),
    ("meta.k8s.io/v1", "APIResourceList", 95),
    ("meta.k8s.io/v1", "APIVersions", 96),
    ("meta.k8s.io/v1", "ApplyOptions", 97),
    ("meta.k8s.io/v1", "CreateOptions", 98),
    ("meta.k8s.io/v1", "DeleteOptions", 99),
    ("meta.k8s.io/v1", "GetOptions", 100),
    ("meta.k8s.io/v1", "List", 101),
    ("meta.k8s.io/v1", "ListOptions", 102),
    ("meta.k8s.io/v1", "PartialObjectMetadata", 103),
    ("meta.k8s.io/v1", "PartialObjectMetadataList", 104),
    ("meta.k8s.io/v1", "PatchOptions", 105),
    ("meta.k8s.io/v1", "Status", 106),
    ("meta.k8s.io/v1", "Table", 107),
    ("meta.k8s.io/v1", "TableOptions", 108),
    ("meta.k8s.io/v1", "UpdateOptions", 109),
    ("networking.k8s.io/v1", "IPAddress", 110),
    ("networking.k8s.io/v1", "IPAddressList", 111),
    ("networking.k8s.io/v1", "Ingress", 112),
    ("networking.k8s.io/v1", "IngressClass", 113),
    ("networking.k8s.io/v1", "IngressClassList", 114),
    ("networking.k8s.io/v1", "IngressList", 115),
    ("networking.k8s.io/v1", "NetworkPolicy", 116),
    ("networking.k8s.io/v1", "NetworkPolicyList", 117),
    ("networking.k8s.io/v1", "ServiceCIDR", 118),
    ("networking.k8s.io/v1", "ServiceCIDRList", 119),
    ("node.k8s.io/v1", "RuntimeClass", 120),
    ("node.k8s.io/v1", "RuntimeClassList", 121),
    ("policy/v1", "Eviction", 122),
    ("policy/v1", "PodDisruptionBudget", 123),
    ("policy/v1", "PodDisruptionBudgetList", 124),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", 125),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", 126),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBindingList",
        127,
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleList", 128),
    ("rbac.authorization.k8s.io/v1", "Role", 129),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", 130),
    ("rbac.authorization.k8s.io/v1", "RoleBindingList", 131),
    ("rbac.authorization.k8s.io/v1", "RoleList", 132),
    ("resource.k8s.io/v1", "DeviceClass", 133),
    ("resource.k8s.io/v1", "DeviceClassList", 134),
    ("resource.k8s.io/v1", "ResourceClaim", 135),
    ("resource.k8s.io/v1", "ResourceClaimList", 136),
    ("resource.k8s.io/v1", "ResourceClaimTemplate", 137),
    ("resource.k8s.io/v1", "ResourceClaimTemplateList", 138),
    ("resource.k8s.io/v1", "ResourceSlice", 139),
    ("resource.k8s.io/v1", "ResourceSliceList", 140),
    ("scheduling.k8s.io/v1", "PriorityClass", 141),
    ("scheduling.k8s.io/v1", "PriorityClassList", 142),
    ("storage.k8s.io/v1", "CSIDriver", 143),
    ("storage.k8s.io/v1", "CSIDriverList", 144),
    ("storage.k8s.io/v1", "CSINode", 145),
    ("storage.k8s.io/v1", "CSINodeList", 146),
    ("storage.k8s.io/v1", "CSIStorageCapacity", 147),
    ("storage.k8s.io/v1", "CSIStorageCapacityList", 148),
    ("storage.k8s.io/v1", "StorageClass", 149),
    ("storage.k8s.io/v1", "StorageClassList", 150),
    ("storage.k8s.io/v1", "VolumeAttachment", 151),
    ("storage.k8s.io/v1", "VolumeAttachmentList", 152),
    ("storage.k8s.io/v1", "VolumeAttributesClass", 153),
    ("storage.k8s.io/v1", "VolumeAttributesClassList", 154),
    ("v1", "Binding", 42),
    ("v1", "ComponentStatus", 43),
    ("v1", "ComponentStatusList", 44),
    ("v1", "ConfigMap", 45),
    ("v1", "ConfigMapList", 46),
    ("v1", "Endpoints", 47),
    ("v1", "EndpointsList", 48),
    ("v1", "Event", 49),
    ("v1", "EventList", 50),
    ("v1", "LimitRange", 51),
    ("v1", "LimitRangeList", 52),
    ("v1", "Namespace", 53),
    ("v1", "NamespaceList", 54),
    ("v1", "Node", 55),
    ("v1", "NodeList", 56),
    ("v1", "NodeProxyOptions", 57),
    ("v1", "PersistentVolume", 58),
    ("v1", "PersistentVolumeClaim", 59),
    ("v1", "PersistentVolumeClaimList", 60),
    ("v1", "PersistentVolumeList", 61),
    ("v1", "Pod", 62),
    ("v1", "PodAttachOptions", 63),
    ("v1", "PodExecOptions", 64),
    ("v1", "PodList", 65),
    ("v1", "PodLogOptions", 66),
    ("v1", "PodPortForwardOptions", 67),
    ("v1", "PodProxyOptions", 68),
    ("v1", "PodStatusResult", 69),
    ("v1", "PodTemplate", 70),
    ("v1", "PodTemplateList", 71),
    ("v1", "RangeAllocation", 72),
    ("v1", "ReplicationController", 73),
    ("v1", "ReplicationControllerList", 74),
    ("v1", "ResourceQuota", 75),
    ("v1", "ResourceQuotaList", 76),
    ("v1", "Secret", 77),
    ("v1", "SecretList", 78),
    ("v1", "SerializedReference", 79),
    ("v1", "Service", 80),
    ("v1", "ServiceAccount", 81),
    ("v1", "ServiceAccountList", 82),
    ("v1", "ServiceList", 83),
    ("v1", "ServiceProxyOptions", 84),
];
