//! busybox `hexdump -C`: the canonical hex+ASCII layout, which upstream's ConfigMap
//! binary-data case reads the bytes of a binary file with (`de ca fe ba d0 fe ff`).

/// `bytes` as `hexdump -C` prints them: per 16 bytes the offset, the bytes in two groups of
/// eight, and their printable ASCII between bars; a final line with the length.
pub(super) fn canonical(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let mut hex = String::new();
        for (j, b) in chunk.iter().enumerate() {
            if j == 8 {
                hex.push(' ');
            }
            hex.push_str(&format!("{b:02x} "));
        }
        let ascii: String = chunk
            .iter()
            .map(|&b| if (0x20..0x7f).contains(&b) { b as char } else { '.' })
            .collect();
        out.push_str(&format!("{:08x}  {hex:<49} |{ascii}|\n", i * 16));
    }
    if !bytes.is_empty() {
        out.push_str(&format!("{:08x}\n", bytes.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn short_input_is_padded_and_counted() {
        let out = canonical(&[0xde, 0xca, 0xfe, 0xba, 0xd0, 0xfe, 0xff]);
        assert_eq!(
            out,
            "00000000  de ca fe ba d0 fe ff                              |.......|\n00000007\n"
        );
    }

    #[test]
    fn a_full_line_splits_after_eight_bytes() {
        let out = canonical(b"0123456789abcdefX");
        assert!(
            out.starts_with(
                "00000000  30 31 32 33 34 35 36 37  38 39 61 62 63 64 65 66  |0123456789abcdef|\n00000010  58"
            ),
            "{out}"
        );
        assert!(out.ends_with("00000011\n"), "{out}");
    }
}
