//! A GPU's PCI address as numbers ([`BusId`]): however a tool spells it
//! (`00000000:3B:00.0` in nvidia-smi, `0000:3b:00.0` in sysfs and the
//! kernel's AER lines, the function-less `0000:3b:00` of an Xid line,
//! `PCI:0000:3b:00` in NVRM, NCCL's hex number of its digits), two
//! spellings of one device compare equal. The one type every join and rule
//! uses for a bus id; it names no other module.

use std::fmt;

/// A PCI address: domain, bus, device, function (a GPU is function 0, the
/// function a spelling without one gets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BusId {
    pub domain: u32,
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl BusId {
    /// Reads any of the spellings above but NCCL's: `domain:bus:device` with
    /// an optional `.function` and an optional `PCI:` in front.
    pub fn parse(text: &str) -> Option<BusId> {
        let text = text.trim();
        let text = text.strip_prefix("PCI:").unwrap_or(text);
        let (address, function) = match text.rsplit_once('.') {
            Some((address, f)) => (address, u8::from_str_radix(f, 16).ok()?),
            None => (text, 0),
        };
        let mut parts = address.split(':');
        let (Some(domain), Some(bus), Some(device), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(BusId {
            domain: u32::from_str_radix(domain, 16).ok()?,
            bus: u8::from_str_radix(bus, 16).ok()?,
            device: u8::from_str_radix(device, 16).ok()?,
            function,
        })
    }

    /// NCCL's `%lx` bus id: the address with `:` and `.` dropped, read as
    /// one hex number (NCCL's busIdToInt64): `18000` is `0000:18:00.0`.
    pub fn from_nccl_hex(hex: &str) -> Option<BusId> {
        let v = u64::from_str_radix(hex, 16).ok()?;
        if v >> 36 != 0 {
            return None;
        }
        Some(BusId {
            domain: (v >> 20) as u32,
            bus: ((v >> 12) & 0xff) as u8,
            device: ((v >> 4) & 0xff) as u8,
            function: (v & 0xf) as u8,
        })
    }

    /// `0000:dc:00`: as the kernel's Xid lines print it (no function).
    pub fn kernel(&self) -> String {
        format!("{:04x}:{:02x}:{:02x}", self.domain, self.bus, self.device)
    }

    /// Whether two spellings name the same device; false when either is
    /// not a bus id.
    pub fn same(a: Option<&str>, b: Option<&str>) -> bool {
        match (a.and_then(BusId::parse), b.and_then(BusId::parse)) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        }
    }
}

/// `0000:ba:00.0`: the kernel's and sysfs's spelling, lower case.
impl fmt::Display for BusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:x}", self.kernel(), self.function)
    }
}

#[cfg(test)]
mod tests {
    use super::BusId;

    #[test]
    fn every_spelling_of_one_device_is_one_bus_id() {
        let a = BusId::parse("00000000:3B:00.0").unwrap();
        for other in [
            "0000:3b:00.0",
            "0000:3b:00",
            "PCI:0000:3b:00",
            " 0000:3B:00.0 ",
        ] {
            assert_eq!(BusId::parse(other), Some(a), "{other}");
        }
        assert_eq!(BusId::from_nccl_hex("3b000"), Some(a));
        assert_eq!(a.to_string(), "0000:3b:00.0");
        assert_eq!(a.kernel(), "0000:3b:00");
        assert!(BusId::same(Some("0000:3b:00"), Some("00000000:3B:00.0")));
        assert!(!BusId::same(Some("0000:3b:00"), Some("0000:3c:00")));
        for bad in [
            "",
            "3b:00.0",
            "0000:zz:00.0",
            "0000:3b:00:00.0",
            "0000:3b:00.x",
        ] {
            assert_eq!(BusId::parse(bad), None, "{bad}");
        }
        assert_eq!(BusId::from_nccl_hex("1000000000"), None);
    }
}
