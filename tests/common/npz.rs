//! Reads `.npz` archives of plain `.npy` members (test code only).

use std::collections::HashMap;
use std::io::Read;

pub struct Npy {
    pub descr: String,
    pub shape: Vec<u64>,
    pub data: Vec<u8>,
}

pub fn read_npz(path: &std::path::Path) -> HashMap<String, Npy> {
    let file = std::fs::File::open(path).unwrap();
    let mut zip = zip::ZipArchive::new(file).unwrap();
    let mut out = HashMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let name = f.name().trim_end_matches(".npy").to_string();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        out.insert(name, parse_npy(&bytes));
    }
    out
}

pub fn parse_npy(b: &[u8]) -> Npy {
    assert_eq!(&b[..6], b"\x93NUMPY");
    let (hlen, start) = if b[6] == 1 {
        (u16::from_le_bytes([b[8], b[9]]) as usize, 10)
    } else {
        (u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize, 12)
    };
    let header = std::str::from_utf8(&b[start..start + hlen]).unwrap();
    let field = |key: &str| -> String {
        let at = header.find(&format!("'{key}'")).unwrap() + key.len() + 3;
        header[at..].trim_start().to_string()
    };
    let descr = field("descr");
    let descr = descr[1..].split('\'').next().unwrap().to_string();
    assert!(field("fortran_order").starts_with("False"));
    let shape_s = field("shape");
    let inner = &shape_s[1..shape_s.find(')').unwrap()];
    let shape = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    Npy {
        descr,
        shape,
        data: b[start + hlen..].to_vec(),
    }
}
