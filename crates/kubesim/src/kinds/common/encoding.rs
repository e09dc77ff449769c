//! Go-compatible byte encodings: base64 as `encoding/json` decodes `[]byte`, and the SHA-256
//! behind discovery's `storageVersionHash`.

// ---------------------------------------------------------------------------------------------
// base64 as Go's `encoding/json` decodes `[]byte` (StdEncoding, padding required, `\r`/`\n`
// skipped). The error offset is Go's `CorruptInputError`, which the server puts in its message.

fn b64_value(c: u8) -> Option<u8> {
    match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// Decodes like Go's `base64.StdEncoding.DecodeString`; `Err(offset)` is the `CorruptInputError`.
pub fn go_base64_decode(s: &str) -> Result<Vec<u8>, usize> {
    let src = s.as_bytes();
    let mut out = Vec::with_capacity(src.len() / 4 * 3);
    let mut si = 0usize;
    while si < src.len() {
        // One quantum (`decodeQuantum`): up to four symbols, newlines skipped, padding ends it.
        let mut dbuf = [0u8; 4];
        let mut dlen = 4usize;
        let mut j = 0usize;
        while j < 4 {
            if si == src.len() {
                if j == 0 {
                    return Ok(out);
                }
                // StdEncoding has padding, so an incomplete final quantum is corrupt.
                return Err(si - j);
            }
            let c = src[si];
            si += 1;
            if let Some(v) = b64_value(c) {
                dbuf[j] = v;
                j += 1;
                continue;
            }
            if c == b'\n' || c == b'\r' {
                continue;
            }
            if c != b'=' {
                return Err(si - 1);
            }
            // Padding.
            match j {
                0 | 1 => return Err(si - 1),
                2 => {
                    // "==" expected; the first '=' is consumed.
                    while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                        si += 1;
                    }
                    if si == src.len() {
                        return Err(src.len());
                    }
                    if src[si] != b'=' {
                        return Err(si - 1);
                    }
                    si += 1;
                }
                _ => {}
            }
            while si < src.len() && (src[si] == b'\n' || src[si] == b'\r') {
                si += 1;
            }
            if si < src.len() {
                // Trailing garbage after padding.
                return Err(si);
            }
            dlen = j;
            break;
        }
        let val = (u32::from(dbuf[0]) << 18)
            | (u32::from(dbuf[1]) << 12)
            | (u32::from(dbuf[2]) << 6)
            | u32::from(dbuf[3]);
        let bytes = [(val >> 16) as u8, (val >> 8) as u8, val as u8];
        // dlen symbols carry dlen-1 bytes.
        out.extend_from_slice(&bytes[..dlen - 1]);
        if dlen < 4 {
            return Ok(out);
        }
    }
    Ok(out)
}

pub fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

// ---------------------------------------------------------------------------------------------
// Discovery's `storageVersionHash`: base64 of the first 8 bytes of sha256("<group>/<version>/<kind>").

pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    let digest = sha256(format!("{group}/{version}/{kind}").as_bytes());
    base64_encode(&digest[..8])
}

/// SHA-256 (FIPS 180-4). Small and only used when a CRD is registered, so no dependency for it.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for chunk in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in chunk.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (i, x) in h.iter().enumerate() {
        out[i * 4..i * 4 + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_errors_carry_go_offsets() {
        assert_eq!(go_base64_decode("%%%"), Err(0));
        assert_eq!(go_base64_decode("!!!not-base64"), Err(0));
        assert_eq!(go_base64_decode("abc"), Err(0));
        assert_eq!(go_base64_decode("abcdab"), Err(4));
        assert_eq!(go_base64_decode("ab=c"), Err(2));
        assert_eq!(go_base64_decode("YQ==x"), Err(4));
        assert_eq!(go_base64_decode("YQ="), Err(3));
        assert_eq!(go_base64_decode("YXBp\nVmVy"), Ok(b"apiVer".to_vec()));
        assert_eq!(go_base64_decode("dg=="), Ok(b"v".to_vec()));
        assert_eq!(go_base64_decode(""), Ok(Vec::new()));
        assert_eq!(go_base64_decode("YWI="), Ok(b"ab".to_vec()));
    }

    #[test]
    fn storage_version_hashes_match_discovery() {
        assert_eq!(storage_version_hash("", "v1", "Secret"), "S6u1pOWzb84=");
        assert_eq!(
            storage_version_hash("coordination.k8s.io", "v1", "Lease"),
            "gqkMMb/YqFM="
        );
        assert_eq!(
            storage_version_hash("courier.dev", "v1alpha1", "WorkerCluster"),
            "EScOB2oMCPI="
        );
    }
}
