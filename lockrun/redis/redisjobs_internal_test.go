package redis

import "testing"

// TestSlotTags: the index set of a Cluster slot is named with a tag that hashes to that
// slot (Redis's CRC16), the same from slotTag (a claim) and allSlotTags (jobs), and never
// a valid key name.
func TestSlotTags(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x; want 0x31c3 (CRC16-XMODEM, as Redis Cluster)", got)
	}
	all := allSlotTags()
	for slot := range clusterSlots {
		tag := slotTag(slot)
		if int(crc16(tag)%clusterSlots) != slot || all[slot] != tag || tag[0] != '#' {
			t.Errorf("slot %d: tag %q (hashes to %d), allSlotTags %q", slot, tag, crc16(tag)%clusterSlots, all[slot])
		}
	}
}

// BenchmarkSlotTag is what a claim on a Cluster spends naming its slot's index set.
func BenchmarkSlotTag(b *testing.B) {
	slot := 0
	for b.Loop() {
		slotTag(slot)
		slot = (slot + 7919) % clusterSlots
	}
}
