//! `.npz`: the model as the archive `np.savez` writes — a zip of stored (uncompressed) members
//! `<key>.npy`, each the tensor's `.npy` file (the same bytes as `NAME.npy`), so that
//! `np.load(path)[key]` is the tensor (APPNOTE.TXT 6.3: local file header §4.3.7, central
//! directory §4.3.12, ZIP64 §4.3.14–16 and §4.5.3, used only when a size, offset or count needs
//! it).
//!
//! Each member's local header starts a page, and so does the central directory: a member that
//! fails its check fails only reads of its own pages (the zero bytes between members are
//! no member's; zip readers go by the central directory's offsets).
//! Sizes are exact from metadata: every header has a fixed length. A member's CRC-32 (in its
//! local header and in the central directory) needs the member's bytes: it is computed when its
//! header is first read (the central directory: every member's, on all cores), and remembered
//! in the persistent store by the tensor's identity, so a remount reads no data for it.
//! Left out (logged): what has no `.npy` (strings, variant), tensors whose metadata names a
//! problem, sparse ones beyond `max_dense`, keys that are not UTF-8 or hold a NUL byte.

use std::sync::{Arc, OnceLock};

use super::View;
use modelfs_io::store::{Crc, Store};
use modelfs_layout::concat::ConcatBuilder;
use modelfs_layout::held::{Made, Make};
use modelfs_layout::{generic, pool, FileContent, LayoutCtx, LayoutError, Reading, Requester};
use modelfs_model::{ModelError, Tensor};

pub(crate) const FILE: &str = ".npz";
/// Bytes per read while computing a checksum.
const CRC_CHUNK: usize = 4 << 20;
/// A 32-bit field that says "see the ZIP64 extra field".
const MAX32: u64 = 0xFFFF_FFFF;
/// 1980-01-01 00:00 in MS-DOS form (the earliest a zip can say).
const DOS_DATE: u16 = (1 << 5) | 1;
/// Bit 11: the name is UTF-8.
const UTF8_NAME: u16 = 1 << 11;

struct Member {
    /// `<key>.npy`.
    name: Vec<u8>,
    npy: Arc<dyn FileContent>,
    size: u64,
    /// Where its local header starts.
    at: u64,
    crc: OnceLock<u32>,
    /// Where its CRC is remembered across mounts (the tensor has a stable identity).
    store_key: Option<String>,
}

impl Member {
    fn zip64(&self) -> bool {
        self.size >= MAX32
    }

    fn flags(&self) -> u16 {
        if self.name.is_ascii() {
            0
        } else {
            UTF8_NAME
        }
    }

    fn local_header_len(&self) -> u64 {
        30 + self.name.len() as u64 + if self.zip64() { 20 } else { 0 }
    }

    /// The CRC-32 of the member's bytes as `read` serves them.
    fn sum_read(&self, req: &dyn Requester) -> Result<u32, LayoutError> {
        let mut h = crc32fast::Hasher::new();
        // Pieces end on `CRC_CHUNK` boundaries of the archive; each is a view of the
        // source's pages where it is mapped (no copy for a sum).
        let base = self.at + self.local_header_len();
        let req = &Reading {
            req,
            ctx: req.ctx().lending(),
        };
        let mut at = 0u64;
        while at < self.size {
            if req.gone() {
                return Err(LayoutError::Interrupted);
            }
            let boundary = (base + at) / CRC_CHUNK as u64 * CRC_CHUNK as u64;
            let want = (boundary + CRC_CHUNK as u64 - base - at).min(self.size - at) as usize;
            let got = self.npy.read(at, want, req)?;
            if got.is_empty() {
                return Err(LayoutError::Internal("short member read"));
            }
            h.update(&got);
            at += got.len() as u64;
        }
        Ok(h.finalize())
    }
}

struct Archive {
    members: Vec<Member>,
    /// Where the central directory starts, and its length.
    cd_at: u64,
    cd_len: u64,
    store: Option<Arc<dyn Store>>,
}

impl Archive {
    /// The CRC-32 of member `i`'s bytes: known, remembered, or computed now.
    fn crc(&self, i: usize, req: &dyn Requester) -> Result<u32, LayoutError> {
        let m = &self.members[i];
        if let Some(&c) = m.crc.get() {
            return Ok(c);
        }
        let store = self.store.as_deref();
        let remembered = m
            .store_key
            .as_ref()
            .zip(store)
            .and_then(|(k, s)| s.get::<Crc>(k))
            .map(|c| c.0);
        let crc = match remembered {
            Some(c) => c,
            None => {
                // Summed with the tensor's own check where it can (one read of each byte);
                // else read (checked) and summed.
                let c = match m.npy.crc32(req) {
                    Some(summed) => summed?,
                    None => m.sum_read(req)?,
                };
                if let (Some(k), Some(s)) = (&m.store_key, store) {
                    s.put(k, &Crc(c));
                }
                c
            }
        };
        Ok(*m.crc.get_or_init(|| crc))
    }

    /// Every member's CRC-32, members shared out over all cores, the largest first: a big
    /// member taken last would leave one core summing it while the others wait.
    fn all_crcs(&self, req: &dyn Requester) -> Result<Vec<u32>, LayoutError> {
        let order = largest_first(self.members.iter().map(|m| m.size));
        let summed = pool::each(order.len(), req, || (), |_, k| self.crc(order[k], req))?;
        let mut crcs = vec![0; order.len()];
        for (i, crc) in order.into_iter().zip(summed) {
            crcs[i] = match crc {
                Ok(c) => c,
                // A member that cannot be read: its reads fail (its local header too, which
                // also needs its CRC), but the directory lists it, so that every other
                // member stays readable. Its CRC there is 0: no value read is ever checked
                // against it.
                Err(e) if super::lasting(&e) => {
                    let name = String::from_utf8_lossy(&self.members[i].name);
                    log::info!("{FILE}: {name}: no CRC-32 in the central directory: {e}");
                    0
                }
                Err(e) => return Err(e),
            };
        }
        Ok(crcs)
    }
}

/// Indices of `sizes`, the largest first (ties in their own order).
fn largest_first(sizes: impl Iterator<Item = u64>) -> Vec<usize> {
    let mut order: Vec<(u64, usize)> = sizes.zip(0..).collect();
    order.sort_by_key(|&(size, i)| (std::cmp::Reverse(size), i));
    order.into_iter().map(|(_, i)| i).collect()
}

fn le16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn le32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}
fn le64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}
/// `v` in a 32-bit field, or the marker that sends the reader to the ZIP64 extra field.
fn field32(v: u64) -> u32 {
    u32::try_from(v)
        .ok()
        .filter(|&v| u64::from(v) < MAX32)
        .unwrap_or(u32::MAX)
}

/// Member `i`'s local file header (§4.3.7).
struct LocalHeader {
    archive: Arc<Archive>,
    i: usize,
}

impl Make for LocalHeader {
    fn size(&self) -> Option<u64> {
        Some(self.archive.members[self.i].local_header_len())
    }
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError> {
        let m = &self.archive.members[self.i];
        let crc = self.archive.crc(self.i, req)?;
        let mut h = Vec::with_capacity(m.local_header_len() as usize);
        le32(&mut h, 0x0403_4b50);
        described(&mut h, m, crc, if m.zip64() { 45 } else { 20 });
        le16(&mut h, if m.zip64() { 20 } else { 0 });
        h.extend_from_slice(&m.name);
        if m.zip64() {
            le16(&mut h, 1);
            le16(&mut h, 16);
            le64(&mut h, m.size);
            le64(&mut h, m.size);
        }
        Ok(h)
    }
}

/// The fields a local header and a central directory entry share, from "version needed" to
/// the name's length (§4.3.7, §4.3.12): a stored member, dated `DOS_DATE`.
fn described(out: &mut Vec<u8>, m: &Member, crc: u32, version_needed: u16) {
    le16(out, version_needed);
    le16(out, m.flags());
    le16(out, 0); // stored
    le16(out, 0); // time
    le16(out, DOS_DATE);
    le32(out, crc);
    le32(out, field32(m.size));
    le32(out, field32(m.size));
    le16(out, m.name.len() as u16);
}

/// The central directory and its end records (§4.3.12–16).
struct Central {
    archive: Arc<Archive>,
}

/// The ZIP64 extra field of a central directory entry: the fields whose 32-bit slot is full.
fn central_extra(m: &Member) -> Vec<u8> {
    let mut fields = Vec::new();
    if m.size >= MAX32 {
        le64(&mut fields, m.size);
        le64(&mut fields, m.size);
    }
    if m.at >= MAX32 {
        le64(&mut fields, m.at);
    }
    if fields.is_empty() {
        return fields;
    }
    let mut e = Vec::with_capacity(4 + fields.len());
    le16(&mut e, 1);
    le16(&mut e, fields.len() as u16);
    e.extend_from_slice(&fields);
    e
}

fn central_entry_len(m: &Member) -> u64 {
    46 + m.name.len() as u64 + central_extra(m).len() as u64
}

/// Whether the end needs the ZIP64 records: a count, size or offset its fields cannot hold.
fn end_zip64(count: usize, cd_at: u64, cd_len: u64) -> bool {
    count >= 0xFFFF || cd_at >= MAX32 || cd_len >= MAX32
}

fn end_len(count: usize, cd_at: u64, cd_len: u64) -> u64 {
    22 + if end_zip64(count, cd_at, cd_len) {
        56 + 20
    } else {
        0
    }
}

impl Make for Central {
    fn size(&self) -> Option<u64> {
        let a = &self.archive;
        Some(a.cd_len + end_len(a.members.len(), a.cd_at, a.cd_len))
    }
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError> {
        let a = &self.archive;
        let crcs = a.all_crcs(req)?;
        let mut out = Vec::new();
        for (m, crc) in a.members.iter().zip(crcs) {
            let extra = central_extra(m);
            le32(&mut out, 0x0201_4b50);
            le16(&mut out, 45); // made by: MS-DOS attributes, spec 4.5
            described(&mut out, m, crc, if extra.is_empty() { 20 } else { 45 });
            le16(&mut out, extra.len() as u16);
            le16(&mut out, 0); // comment
            le16(&mut out, 0); // disk
            le16(&mut out, 0); // internal attributes
            le32(&mut out, 0); // external attributes
            le32(&mut out, field32(m.at));
            out.extend_from_slice(&m.name);
            out.extend_from_slice(&extra);
        }
        debug_assert_eq!(out.len() as u64, a.cd_len);
        let n = a.members.len();
        if end_zip64(n, a.cd_at, a.cd_len) {
            let record_at = a.cd_at + a.cd_len;
            le32(&mut out, 0x0606_4b50);
            le64(&mut out, 44);
            le16(&mut out, 45);
            le16(&mut out, 45);
            le32(&mut out, 0);
            le32(&mut out, 0);
            le64(&mut out, n as u64);
            le64(&mut out, n as u64);
            le64(&mut out, a.cd_len);
            le64(&mut out, a.cd_at);
            le32(&mut out, 0x0706_4b50);
            le32(&mut out, 0);
            le64(&mut out, record_at);
            le32(&mut out, 1);
        }
        let count16 = u16::try_from(n)
            .ok()
            .filter(|&c| c < 0xFFFF)
            .unwrap_or(0xFFFF);
        le32(&mut out, 0x0605_4b50);
        le16(&mut out, 0);
        le16(&mut out, 0);
        le16(&mut out, count16);
        le16(&mut out, count16);
        le32(&mut out, field32(a.cd_len));
        le32(&mut out, field32(a.cd_at));
        le16(&mut out, 0);
        Ok(out)
    }
}

/// The store key of a member's CRC-32.
fn store_key(t: &dyn Tensor) -> Option<String> {
    Some(format!("{}\0npz-crc:v1", t.cache_identity()?))
}

/// One member of an archive: `<key>.npy` holding `npy`, its CRC-32 remembered under
/// `store_key`.
pub(crate) struct NpzMember {
    pub(crate) key: String,
    pub(crate) npy: Arc<dyn FileContent>,
    pub(crate) store_key: Option<String>,
}

/// `.npz` of the model whose tensors are `tensors` (sorted by key, unique).
pub(crate) fn view(
    tensors: Vec<Arc<dyn Tensor>>,
    ctx: &Arc<LayoutCtx>,
) -> Result<View, ModelError> {
    let mut members = Vec::new();
    for t in tensors {
        let meta = t.meta();
        let key = String::from_utf8_lossy(&meta.name).into_owned();
        let npy = match (&meta.problem, std::str::from_utf8(&meta.name)) {
            (Some(p), _) => Err(format!("it has a problem: {p}")),
            (None, Err(_)) => Err("its key is not UTF-8".to_string()),
            // Zip readers end a name at its first NUL (Python's zipfile does).
            (None, Ok(k)) if k.contains('\0') => Err("its key holds a NUL byte".to_string()),
            (None, Ok(_)) => generic::check_npy(meta, ctx)
                .and_then(|()| generic::npy(t.clone(), ctx))
                .map_err(|e| e.to_string()),
        };
        match npy {
            Ok(npy) => members.push(NpzMember {
                key,
                npy,
                store_key: store_key(&*t),
            }),
            Err(why) => log::info!("{FILE}: {key} left out: {why}"),
        }
    }
    Ok(View::file(archive(members, ctx)?))
}

/// The archive `np.savez` would write of `members`, in their order.
pub(crate) fn archive(
    members: Vec<NpzMember>,
    ctx: &Arc<LayoutCtx>,
) -> Result<modelfs_layout::concat::Concat, ModelError> {
    let overflow = || ModelError::data(FILE, "the archive's size overflows");
    let mut out_members = Vec::new();
    let mut at = 0u64;
    for NpzMember {
        key,
        npy,
        store_key,
    } in members
    {
        let name = format!("{key}.npy").into_bytes();
        if name.len() > usize::from(u16::MAX) {
            log::info!("{FILE}: {key} left out: its name is too long for a zip");
            continue;
        }
        let size = npy.known_size().ok_or_else(overflow)?;
        // Each member from a page of its own: a bad member's failed page is no other's.
        at = super::page_up(at).ok_or_else(overflow)?;
        let m = Member {
            name,
            npy,
            size,
            at,
            crc: OnceLock::new(),
            store_key,
        };
        at = at
            .checked_add(m.local_header_len())
            .and_then(|a| a.checked_add(size))
            .ok_or_else(overflow)?;
        out_members.push(m);
    }
    let members = out_members;
    let at = super::page_up(at).ok_or_else(overflow)?;
    let cd_len = members
        .iter()
        .try_fold(0u64, |sum, m| sum.checked_add(central_entry_len(m)))
        .ok_or_else(overflow)?;
    let archive = Arc::new(Archive {
        members,
        cd_at: at,
        cd_len,
        store: ctx.cache.offset_store().cloned(),
    });
    let mut out = ConcatBuilder::default();
    let too_big = |_| overflow();
    let gap = |out: &mut ConcatBuilder, to: u64| match to - out.offset() {
        0 => Ok(()),
        n => out.push(Arc::new(super::Gap(n))),
    };
    for (i, m) in archive.members.iter().enumerate() {
        gap(&mut out, m.at).map_err(too_big)?;
        debug_assert_eq!(out.offset(), m.at);
        out.push(Arc::new(Made::new(LocalHeader {
            archive: archive.clone(),
            i,
        })))
        .map_err(too_big)?;
        out.push(m.npy.clone()).map_err(too_big)?;
    }
    gap(&mut out, archive.cd_at).map_err(too_big)?;
    out.push(Arc::new(Made::new(Central {
        archive: archive.clone(),
    })))
    .map_err(too_big)?;
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Seek, SeekFrom};

    use super::*;
    use modelfs_io::source::ReadCtx;
    use modelfs_layout::cache::ChunkCache;
    use modelfs_model::{DType, TensorMeta};

    /// 5 × 10^9 zero bytes (a member past every 32-bit field), read without memory.
    struct Zeros(TensorMeta);

    impl Tensor for Zeros {
        fn meta(&self) -> &TensorMeta {
            &self.0
        }
        fn fill_elements(&self, _: &ReadCtx, _: u64, out: &mut [u8]) -> Result<(), ModelError> {
            out.fill(0);
            Ok(())
        }
        fn cache_identity(&self) -> Option<String> {
            Some("zeros".into())
        }
    }

    /// The view as a `Read + Seek` file.
    struct File {
        c: Arc<dyn FileContent>,
        at: u64,
    }

    impl Read for File {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self
                .c
                .read_at(self.at, buf)
                .map_err(std::io::Error::other)?;
            self.at += n as u64;
            Ok(n)
        }
    }

    impl Seek for File {
        fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
            let size = self.c.known_size().unwrap() as i64;
            self.at = match pos {
                SeekFrom::Start(p) => p as i64,
                SeekFrom::End(d) => size + d,
                SeekFrom::Current(d) => self.at as i64 + d,
            } as u64;
            Ok(self.at)
        }
    }

    #[test]
    fn members_are_summed_largest_first() {
        assert_eq!(
            largest_first([32, 256, 32, 0, 256].into_iter()),
            [1, 4, 0, 2, 3]
        );
        assert!(largest_first(std::iter::empty()).is_empty());
    }

    /// A TF tensor's member is summed in the pass that checks the tensor's CRC32C, each byte
    /// read once: the CRC-32s are the bytes' (the `zip` crate checks them as it reads), and
    /// the tensors count as checked afterwards. A tensor whose bytes fail their check fails
    /// the archive's directory (EIO at the mount) and keeps failing: no CRC-32 of bad bytes.
    #[test]
    fn members_are_summed_in_the_pass_that_checks_them() {
        use modelfs_tf::bundle::testutil::BundleBuilder;
        for corrupt in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let mut b = BundleBuilder::new("ckpt");
            b.add_f32(b"small", &[4], &[1.0, 2.0, 3.0, 4.0]);
            // Several runs of `SUM_RUN` bytes.
            let w: Vec<f32> = (0..700_000).map(|i| i as f32 * 0.5).collect();
            b.add_f32(b"w", &[7000, 100], &w);
            let prefix = b.write_to_dir(tmp.path()).unwrap();
            if corrupt {
                let data = tmp.path().join("ckpt.data-00000-of-00001");
                let mut bytes = std::fs::read(&data).unwrap();
                let at = bytes.len() - 1000; // in `w`, stored after `small`
                bytes[at] ^= 1;
                std::fs::write(&data, &bytes).unwrap();
            }
            let opts = modelfs_model::ReaderOptions::default();
            let model = modelfs_detect::model_at(&prefix, &opts).unwrap();
            let tensors: Vec<Arc<dyn Tensor>> = [&b"small"[..], b"w"]
                .iter()
                .map(|k| model.tensor(&[k.to_vec()]).unwrap())
                .collect();
            assert!(tensors.iter().all(|t| t.deferred_crc32c().is_some()));
            let ctx = Arc::new(LayoutCtx::new(vec![], ChunkCache::new(1 << 20)));
            let v = view(tensors.clone(), &ctx).unwrap();
            let super::super::ViewEntry::File(c) = v.root else {
                panic!("a file view")
            };
            let z = zip::ZipArchive::new(File { c, at: 0 });
            if corrupt {
                assert!(z.is_err());
                assert!(tensors[1].read(ReadCtx::none(), 0, 4).is_err());
                assert!(tensors[0].read(ReadCtx::none(), 0, 16).is_ok());
                continue;
            }
            let mut z = z.unwrap();
            for (key, t) in ["small", "w"].into_iter().zip(tensors) {
                assert!(t.deferred_crc32c().is_none(), "{key}: checked by the pass");
                let npy = modelfs_layout::binary::npy_content(t).unwrap();
                let mut want = vec![0u8; npy.known_size().unwrap() as usize];
                npy.read_at(0, &mut want).unwrap();
                let mut got = Vec::new();
                let mut m = z.by_name(&format!("{key}.npy")).unwrap();
                m.read_to_end(&mut got).unwrap(); // checks the CRC-32
                assert!(got == want, "{key}");
            }
        }
    }

    /// A member bigger than 4 GiB at the front: its sizes and the next member's offset need
    /// ZIP64, and so does the end. Read by the `zip` crate (and by Python's zipfile over a
    /// sparse copy when python3 is there): names, sizes, offsets, and the small member's bytes
    /// and CRC. The big member's CRC is taken from the store (remembered), so nothing reads it.
    #[test]
    fn a_member_over_4_gib_is_written_with_zip64() {
        let big: Arc<dyn Tensor> = Arc::new(Zeros(TensorMeta {
            mtime: std::time::SystemTime::UNIX_EPOCH,
            ..TensorMeta::new(
                b"big".to_vec(),
                DType::U8,
                vec![5_000_000_000],
                "tf-checkpoint",
            )
        }));
        let small: Arc<dyn Tensor> = Arc::new(
            modelfs_model::testing::MemTensor::f32(&[3], &[1.5, -2.0, 0.25]).named(b"small"),
        );
        let store: Arc<dyn Store> = Arc::new(modelfs_io::store::MemStore::default());
        store.put("zeros\0npz-crc:v1", &Crc(0x1234_5678));
        let cache = ChunkCache::new(1 << 20);
        cache.set_offset_store(store.clone());
        let ctx = Arc::new(LayoutCtx::new(vec![], cache));
        let v = view(vec![big, small.clone()], &ctx).unwrap();
        let super::super::ViewEntry::File(c) = v.root else {
            panic!("a file view")
        };
        let size = c.known_size().unwrap();
        let mut z = zip::ZipArchive::new(File {
            c: c.clone(),
            at: 0,
        })
        .unwrap();
        assert_eq!(z.len(), 2);
        let npy_small = modelfs_layout::binary::npy_content(small).unwrap();
        let mut want = vec![0u8; npy_small.known_size().unwrap() as usize];
        npy_small.read_at(0, &mut want).unwrap();
        {
            let b = z.by_name("big.npy").unwrap();
            assert!(b.size() > 5_000_000_000 && b.size() == b.compressed_size());
            assert_eq!(b.crc32(), 0x1234_5678);
        }
        let mut s = z.by_name("small.npy").unwrap();
        let small_at = s.header_start();
        assert!(small_at > u64::from(u32::MAX));
        let mut got = Vec::new();
        s.read_to_end(&mut got).unwrap(); // checks the CRC computed from the bytes
        assert_eq!(got, want);
        drop(s);
        // Python's zipfile, over a sparse file holding our bytes where they are not zeros.
        let have_numpy = std::process::Command::new("python3")
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            have_numpy || std::env::var_os("CI").is_none(),
            "CI needs python3 with numpy"
        );
        if have_numpy {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("m.npz");
            let f = std::fs::File::create(&path).unwrap();
            f.set_len(size).unwrap();
            use std::os::unix::fs::FileExt;
            let mut buf = vec![0u8; 1 << 16];
            // Everything but the zeros of the big member: its headers, then the rest.
            for (from, to) in [(0, 200), (small_at, size)] {
                let mut at = from;
                while at < to {
                    let n = c
                        .read_at(at, &mut buf[..((to - at) as usize).min(1 << 16)])
                        .unwrap();
                    f.write_all_at(&buf[..n], at).unwrap();
                    at += n as u64;
                }
            }
            let out = std::process::Command::new("python3")
                .args([
                    "-c",
                    "import sys, zipfile, numpy as np\n\
                     z = zipfile.ZipFile(sys.argv[1])\n\
                     i = {x.filename: x for x in z.infolist()}\n\
                     assert i['big.npy'].file_size > 5_000_000_000, i\n\
                     print(list(np.load(sys.argv[1])['small']))",
                ])
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                String::from_utf8_lossy(&out.stdout).trim(),
                "[np.float32(1.5), np.float32(-2.0), np.float32(0.25)]"
            );
        }
    }
}
