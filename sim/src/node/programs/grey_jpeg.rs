//! A minimal baseline JPEG: one 8x8 block of a single grey level. The simulated update-demo
//! images serve it under their picture's name (upstream's are photographs the simulator does
//! not carry), so what a client fetches is a JPEG any decoder opens.
//!
//! A block of constant value has only a DC coefficient; with a quantiser of 1 and one-symbol
//! Huffman tables (the DC category, and end-of-block for AC, each coded `0`) the scan is a few
//! bits.

/// A JFIF file holding an 8x8 image of grey `level`.
pub fn grey_jpeg(level: u8) -> Vec<u8> {
    // F(0,0) of a constant block of (level - 128) is 8 * (level - 128).
    let dc = 8 * (i32::from(level) - 128);
    let category = 32 - dc.unsigned_abs().leading_zeros();
    let mut out = vec![0xff, 0xd8];
    // APP0 JFIF 1.01, no density, no thumbnail.
    segment(&mut out, 0xe0, &[b'J', b'F', b'I', b'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0]);
    // DQT: table 0, 8-bit, all ones.
    let mut dqt = vec![0u8];
    dqt.extend([1u8; 64]);
    segment(&mut out, 0xdb, &dqt);
    // SOF0: 8-bit, 8x8, one component (id 1, 1x1 sampling, quantiser 0).
    segment(&mut out, 0xc0, &[8, 0, 8, 0, 8, 1, 1, 0x11, 0]);
    // DHT: DC table 0 and AC table 0, one code of length 1 each.
    let table = |class_id: u8, symbol: u8| {
        let mut t = vec![class_id, 1];
        t.extend([0u8; 15]);
        t.push(symbol);
        t
    };
    segment(&mut out, 0xc4, &table(0x00, category as u8));
    segment(&mut out, 0xc4, &table(0x10, 0x00));
    // SOS: component 1 with tables 0/0, spectral 0..63, no approximation.
    segment(&mut out, 0xda, &[1, 1, 0x00, 0, 63, 0]);
    // Scan: DC category code `0`, the DC value's bits (ones' complement when negative), AC
    // end-of-block code `0`, padded with ones.
    let mut bits: Vec<bool> = vec![false];
    if category > 0 {
        let twos = if dc >= 0 { dc } else { dc - 1 };
        let value = (twos as u32) & ((1u32 << category) - 1);
        bits.extend((0..category).rev().map(|i| (value >> i) & 1 == 1));
    }
    bits.push(false);
    while !bits.len().is_multiple_of(8) {
        bits.push(true);
    }
    for byte in bits.chunks(8) {
        let b = byte.iter().fold(0u8, |acc, &bit| (acc << 1) | u8::from(bit));
        out.push(b);
        if b == 0xff {
            out.push(0x00);
        }
    }
    out.extend([0xff, 0xd9]);
    out
}

/// Appends marker `kind` with `body` (the length field counts itself).
fn segment(out: &mut Vec<u8>, kind: u8, body: &[u8]) {
    let len = u16::try_from(body.len() + 2).expect("segments here are small");
    out.extend([0xff, kind]);
    out.extend(len.to_be_bytes());
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mid_grey_is_a_dc_of_zero() {
        let j = grey_jpeg(128);
        // Category 0, no value bits, EOB: `0`, `0`, then six padding ones.
        assert_eq!(&j[j.len() - 3..], &[0b0011_1111, 0xff, 0xd9]);
        assert_eq!(&j[..4], &[0xff, 0xd8, 0xff, 0xe0]);
    }

    #[test]
    fn shades_encode_their_dc_value() {
        // 0x40: dc = -512, category 10, ones' complement 0b01_1111_1111.
        let j = grey_jpeg(0x40);
        let scan = &j[j.len() - 4..j.len() - 2];
        // `0` + `0111111111` + `0` + padding `1111`.
        assert_eq!(scan, &[0b0011_1111, 0b1110_1111]);
        // 0xc0: dc = 512, `0` + `1000000000` + `0` + `1111`.
        let j = grey_jpeg(0xc0);
        assert_eq!(&j[j.len() - 4..j.len() - 2], &[0b0100_0000, 0b0000_1111]);
    }
}
