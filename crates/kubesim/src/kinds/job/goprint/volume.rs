//! Schemas of the internal `core.Volume` and its common sources (the rest print as versioned
//! JSON), for the field-error renderer in `goprint`.

use super::container::{OBJECT_FIELD_SELECTOR, RESOURCE_FIELD_SELECTOR};
use super::{F, K, LOCAL_OBJECT_REFERENCE};

const KEY_TO_PATH: &[F] = &[
    F("Key", "key", K::Str),
    F("Path", "path", K::Str),
    F("Mode", "mode", K::Plain),
];
const HOST_PATH: &[F] = &[F("Path", "path", K::Str), F("Type", "type", K::Plain)];
const EMPTY_DIR: &[F] = &[
    F("Medium", "medium", K::Str),
    F("SizeLimit", "sizeLimit", K::Plain),
];
const SECRET_VOLUME: &[F] = &[
    F("SecretName", "secretName", K::Str),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("DefaultMode", "defaultMode", K::Plain),
    F("Optional", "optional", K::Plain),
];
const CONFIG_MAP_VOLUME: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("DefaultMode", "defaultMode", K::Plain),
    F("Optional", "optional", K::Plain),
];
const PVC_VOLUME: &[F] = &[
    F("ClaimName", "claimName", K::Str),
    F("ReadOnly", "readOnly", K::Bool),
];
const NFS_VOLUME: &[F] = &[
    F("Server", "server", K::Str),
    F("Path", "path", K::Str),
    F("ReadOnly", "readOnly", K::Bool),
];
const DOWNWARD_API_FILE: &[F] = &[
    F("Path", "path", K::Str),
    F("FieldRef", "fieldRef", K::Ptr(OBJECT_FIELD_SELECTOR)),
    F(
        "ResourceFieldRef",
        "resourceFieldRef",
        K::Ptr(RESOURCE_FIELD_SELECTOR),
    ),
    F("Mode", "mode", K::Plain),
];
const DOWNWARD_API_VOLUME: &[F] = &[
    F("Items", "items", K::Slice(DOWNWARD_API_FILE)),
    F("DefaultMode", "defaultMode", K::Plain),
];
const OBJECT_PROJECTION: &[F] = &[
    F("LocalObjectReference", "", K::Embed(LOCAL_OBJECT_REFERENCE)),
    F("Items", "items", K::Slice(KEY_TO_PATH)),
    F("Optional", "optional", K::Plain),
];
const DOWNWARD_API_PROJECTION: &[F] = &[F("Items", "items", K::Slice(DOWNWARD_API_FILE))];
const SA_TOKEN_PROJECTION: &[F] = &[
    F("Audience", "audience", K::Str),
    F("ExpirationSeconds", "expirationSeconds", K::Int),
    F("Path", "path", K::Str),
];
const VOLUME_PROJECTION: &[F] = &[
    F("Secret", "secret", K::Ptr(OBJECT_PROJECTION)),
    F(
        "DownwardAPI",
        "downwardAPI",
        K::Ptr(DOWNWARD_API_PROJECTION),
    ),
    F("ConfigMap", "configMap", K::Ptr(OBJECT_PROJECTION)),
    F(
        "ServiceAccountToken",
        "serviceAccountToken",
        K::Ptr(SA_TOKEN_PROJECTION),
    ),
    F("ClusterTrustBundle", "clusterTrustBundle", K::Raw),
    F("PodCertificate", "podCertificate", K::Raw),
];
const PROJECTED_VOLUME: &[F] = &[
    F("Sources", "sources", K::Slice(VOLUME_PROJECTION)),
    F("DefaultMode", "defaultMode", K::Plain),
];
const CSI_VOLUME: &[F] = &[
    F("Driver", "driver", K::Str),
    F("ReadOnly", "readOnly", K::Plain),
    F("FSType", "fsType", K::Plain),
    F("VolumeAttributes", "volumeAttributes", K::Plain),
    F(
        "NodePublishSecretRef",
        "nodePublishSecretRef",
        K::Ptr(LOCAL_OBJECT_REFERENCE),
    ),
];
const IMAGE_VOLUME: &[F] = &[
    F("Reference", "reference", K::Str),
    F("PullPolicy", "pullPolicy", K::Str),
];
const VOLUME_SOURCE: &[F] = &[
    F("HostPath", "hostPath", K::Ptr(HOST_PATH)),
    F("EmptyDir", "emptyDir", K::Ptr(EMPTY_DIR)),
    F("GCEPersistentDisk", "gcePersistentDisk", K::Raw),
    F("AWSElasticBlockStore", "awsElasticBlockStore", K::Raw),
    F("GitRepo", "gitRepo", K::Raw),
    F("Secret", "secret", K::Ptr(SECRET_VOLUME)),
    F("NFS", "nfs", K::Ptr(NFS_VOLUME)),
    F("ISCSI", "iscsi", K::Raw),
    F("Glusterfs", "glusterfs", K::Raw),
    F(
        "PersistentVolumeClaim",
        "persistentVolumeClaim",
        K::Ptr(PVC_VOLUME),
    ),
    F("RBD", "rbd", K::Raw),
    F("Quobyte", "quobyte", K::Raw),
    F("FlexVolume", "flexVolume", K::Raw),
    F("Cinder", "cinder", K::Raw),
    F("CephFS", "cephfs", K::Raw),
    F("Flocker", "flocker", K::Raw),
    F("DownwardAPI", "downwardAPI", K::Ptr(DOWNWARD_API_VOLUME)),
    F("FC", "fc", K::Raw),
    F("AzureFile", "azureFile", K::Raw),
    F("ConfigMap", "configMap", K::Ptr(CONFIG_MAP_VOLUME)),
    F("VsphereVolume", "vsphereVolume", K::Raw),
    F("AzureDisk", "azureDisk", K::Raw),
    F("PhotonPersistentDisk", "photonPersistentDisk", K::Raw),
    F("Projected", "projected", K::Ptr(PROJECTED_VOLUME)),
    F("PortworxVolume", "portworxVolume", K::Raw),
    F("ScaleIO", "scaleIO", K::Raw),
    F("StorageOS", "storageos", K::Raw),
    F("CSI", "csi", K::Ptr(CSI_VOLUME)),
    F("Ephemeral", "ephemeral", K::Raw),
    F("Image", "image", K::Ptr(IMAGE_VOLUME)),
];
pub(super) const VOLUME: &[F] = &[
    F("Name", "name", K::Str),
    F("VolumeSource", "", K::Embed(VOLUME_SOURCE)),
];
