//! Pod volumes (`ValidateVolumes` / `validateVolumeSource`): names, exactly one source, the basic
//! fields of the common sources, item paths and modes.

use std::collections::HashSet;

use serde_json::Value;

use super::{invalid_each, s};
use crate::errors::{BadValue, FieldError, FieldErrors};
use crate::json::{get, get_arr, get_i64, get_str};
use crate::validation::names::is_dns1123_label;
use crate::validation::path::Path;

/// Volume source members in the order `validateVolumeSource` checks them, with the path element Go
/// reports for "more than 1 volume type" (two of them keep Go's historical spelling).
const VOLUME_SOURCE_ORDER: &[(&str, &str)] = &[
    ("emptyDir", "emptyDir"),
    ("hostPath", "hostPath"),
    ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"),
    ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"),
    ("nfs", "nfs"),
    ("iscsi", "iscsi"),
    ("glusterfs", "glusterfs"),
    ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"),
    ("rbd", "rbd"),
    ("cinder", "cinder"),
    ("cephfs", "cephFS"),
    ("quobyte", "quobyte"),
    ("downwardAPI", "downwarAPI"),
    ("fc", "fc"),
    ("flexVolume", "flexVolume"),
    ("configMap", "configMap"),
    ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"),
    ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"),
    ("azureDisk", "azureDisk"),
    ("storageos", "storageos"),
    ("projected", "projected"),
    ("scaleIO", "scaleIO"),
    ("csi", "csi"),
    ("ephemeral", "ephemeral"),
    ("image", "image"),
];

const FILE_MODE_ERR: &str = "must be a number between 0 and 0777 (octal), both inclusive";

fn validate_mode(errs: &mut FieldErrors, field: Path<'_>, mode: Option<i64>) {
    if let Some(m) = mode
        && !(0..=0o777).contains(&m)
    {
        errs.push(FieldError::invalid(field, BadValue::Int(m), FILE_MODE_ERR));
    }
}

/// `validateLocalDescendingPath`: relative, no `..` element.
pub(super) fn validate_local_descending_path(errs: &mut FieldErrors, field: Path<'_>, p: &str) {
    if p.starts_with('/') {
        errs.push(FieldError::invalid(field, s(p), "must be a relative path"));
    }
    if p.split(['/', '\\']).any(|e| e == "..") {
        errs.push(FieldError::invalid(field, s(p), "must not contain '..'"));
    }
}

fn validate_key_to_paths(errs: &mut FieldErrors, path: Path<'_>, items: Option<&Vec<Value>>) {
    let items_path = path.child("items");
    for (i, item) in items
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = items_path.index(i);
        if get_str(item, &["key"]).unwrap_or("").is_empty() {
            errs.push(FieldError::required(ip.child("key"), ""));
        }
        let p = get_str(item, &["path"]).unwrap_or("");
        if p.is_empty() {
            errs.push(FieldError::required(ip.child("path"), ""));
        } else {
            validate_local_descending_path(errs, ip.child("path"), p);
        }
        validate_mode(errs, ip.child("mode"), get_i64(item, &["mode"]));
    }
}

/// `validateVolumeSource` (type count and the common sources' fields).
fn validate_volume_source(vol: &Value, path: Path<'_>) -> FieldErrors {
    let mut errs = Vec::new();
    let mut count = 0;
    for (json, go_path) in VOLUME_SOURCE_ORDER {
        let Some(src) = get(vol, &[json]).filter(|v| !v.is_null()) else {
            continue;
        };
        if count > 0 {
            errs.push(FieldError::forbidden(
                path.child(go_path),
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        count += 1;
        let sp = path.child(json);
        match *json {
            "hostPath" if get_str(src, &["path"]).unwrap_or("").is_empty() => {
                errs.push(FieldError::required(sp.child("path"), ""));
            }
            "secret" => {
                validate_key_to_paths(&mut errs, sp, get_arr(src, &["items"]));
                validate_mode(
                    &mut errs,
                    sp.child("defaultMode"),
                    get_i64(src, &["defaultMode"]),
                );
            }
            "configMap" => {
                if get_str(src, &["name"]).unwrap_or("").is_empty() {
                    errs.push(FieldError::required(sp.child("name"), ""));
                }
                validate_key_to_paths(&mut errs, sp, get_arr(src, &["items"]));
                validate_mode(
                    &mut errs,
                    sp.child("defaultMode"),
                    get_i64(src, &["defaultMode"]),
                );
            }
            "persistentVolumeClaim" if get_str(src, &["claimName"]).unwrap_or("").is_empty() => {
                errs.push(FieldError::required(sp.child("claimName"), ""));
            }
            "nfs" => {
                if get_str(src, &["server"]).unwrap_or("").is_empty() {
                    errs.push(FieldError::required(sp.child("server"), ""));
                }
                let p = get_str(src, &["path"]).unwrap_or("");
                if p.is_empty() {
                    errs.push(FieldError::required(sp.child("path"), ""));
                } else if !p.starts_with('/') {
                    errs.push(FieldError::invalid(
                        sp.child("path"),
                        s(p),
                        "must be an absolute path",
                    ));
                }
            }
            _ => {}
        }
    }
    if count == 0 {
        errs.push(FieldError::required(path, "must specify a volume type"));
    }
    errs
}

/// `ValidateVolumes`: returns the names of the valid volumes (for mount checks) and the errors.
pub(super) fn validate_volumes(spec: &Value, path: Path<'_>) -> (HashSet<String>, FieldErrors) {
    let mut names = HashSet::new();
    let mut errs = Vec::new();
    for (i, vol) in get_arr(spec, &["volumes"])
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let ip = path.index(i);
        let name = get_str(vol, &["name"]).unwrap_or("");
        let mut el = validate_volume_source(vol, ip);
        if name.is_empty() {
            el.push(FieldError::required(ip.child("name"), ""));
        } else {
            invalid_each(&mut el, ip.child("name"), name, is_dns1123_label(name));
        }
        if names.contains(name) {
            el.push(FieldError::duplicate(ip.child("name"), s(name)));
        }
        if el.is_empty() {
            names.insert(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    (names, errs)
}
