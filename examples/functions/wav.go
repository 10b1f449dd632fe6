package functions

import (
	"encoding/binary"
	"fmt"
)

// wavAudio is the PCM content of a WAV file.
type wavAudio struct {
	channels   int
	sampleRate int
	// data holds whole frames of little-endian 16-bit samples, channels
	// interleaved; a trailing partial frame is dropped.
	data []byte
}

// frames is the number of sample frames (one sample per channel each).
func (a wavAudio) frames() int { return len(a.data) / (2 * a.channels) }

// Limits of what the speech stand-in accepts. Speech needs at least 1 kHz to
// carry anything; 384 kHz is the highest rate audio interfaces use.
const (
	wavMinRate     = 1000
	wavMaxRate     = 384000
	wavMaxChannels = 16
	wavHeaderSize  = 44 // RIFF header, a 16-byte fmt chunk, the data chunk header
)

const (
	wavFormatPCM        = 1
	wavFormatExtensible = 0xFFFE
)

// parseWAV reads a RIFF/WAVE file of 16-bit PCM. It walks the chunk list
// rather than assuming the canonical 44-byte layout, because encoders add
// LIST, fact and other chunks before the data.
func parseWAV(b []byte) (wavAudio, error) {
	if len(b) < 12 || string(b[0:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
		return wavAudio{}, badInput("not a RIFF/WAVE file")
	}
	// Trust the RIFF size only to cut trailing bytes: many writers leave it
	// wrong, and the chunks are checked against the real length anyway.
	end := len(b)
	if riff := int64(binary.LittleEndian.Uint32(b[4:8])) + 8; riff < int64(end) {
		end = int(max(riff, 12))
	}
	var (
		a      wavAudio
		gotFmt bool
	)
	for off := 12; off+8 <= end; {
		id := string(b[off : off+4])
		size := int64(binary.LittleEndian.Uint32(b[off+4 : off+8]))
		body := int64(off + 8)
		if body+size > int64(end) {
			return wavAudio{}, badInput("WAV chunk %q at byte %d runs past the end of the file", id, off)
		}
		chunk := b[body : body+size]
		switch id {
		case "fmt ":
			if err := a.readFormat(chunk); err != nil {
				return wavAudio{}, err
			}
			gotFmt = true
		case "data":
			if !gotFmt {
				return wavAudio{}, badInput("WAV data chunk comes before the fmt chunk")
			}
			whole := len(chunk) - len(chunk)%(2*a.channels)
			return wavAudio{channels: a.channels, sampleRate: a.sampleRate, data: chunk[:whole]}, nil
		}
		off = int(body + size + size%2) // chunks are padded to an even length
	}
	if !gotFmt {
		return wavAudio{}, badInput("WAV file has no fmt chunk")
	}
	return wavAudio{}, badInput("WAV file has no data chunk")
}

// readFormat checks the fmt chunk: 16-bit PCM, plain or extensible.
func (a *wavAudio) readFormat(c []byte) error {
	if len(c) < 16 {
		return badInput("WAV fmt chunk is %d bytes, want at least 16", len(c))
	}
	format := binary.LittleEndian.Uint16(c[0:2])
	channels := int(binary.LittleEndian.Uint16(c[2:4]))
	rate := int(binary.LittleEndian.Uint32(c[4:8]))
	blockAlign := int(binary.LittleEndian.Uint16(c[12:14]))
	bits := int(binary.LittleEndian.Uint16(c[14:16]))
	if format == wavFormatExtensible {
		// The sub-format GUID at byte 24 starts with the plain format code.
		if len(c) < 26 {
			return badInput("WAV extensible fmt chunk is %d bytes, want at least 26", len(c))
		}
		format = binary.LittleEndian.Uint16(c[24:26])
	}
	switch {
	case format != wavFormatPCM:
		return badInput("WAV format %d is not PCM", format)
	case bits != 16:
		return badInput("WAV has %d-bit samples, want 16-bit", bits)
	case channels < 1 || channels > wavMaxChannels:
		return badInput("WAV has %d channels, want 1 to %d", channels, wavMaxChannels)
	case rate < wavMinRate || rate > wavMaxRate:
		return badInput("WAV sample rate %d Hz is outside %d-%d Hz", rate, wavMinRate, wavMaxRate)
	case blockAlign != 2*channels:
		return badInput("WAV block align %d does not match %d channels of 16-bit samples", blockAlign, channels)
	}
	a.channels, a.sampleRate = channels, rate
	return nil
}

// encodeWAV writes mono 16-bit PCM samples as a canonical 44-byte-header WAV.
func encodeWAV(samples []int16, rate int) []byte {
	data := 2 * len(samples)
	b := make([]byte, wavHeaderSize, wavHeaderSize+data)
	copy(b[0:], "RIFF")
	binary.LittleEndian.PutUint32(b[4:], uint32(wavHeaderSize-8+data))
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], wavFormatPCM)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], uint32(rate))
	binary.LittleEndian.PutUint32(b[28:], uint32(2*rate))
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], uint32(data))
	for _, s := range samples {
		b = binary.LittleEndian.AppendUint16(b, uint16(s))
	}
	return b
}

// String describes the audio for error messages and tests.
func (a wavAudio) String() string {
	return fmt.Sprintf("%d Hz, %d channels, %d frames", a.sampleRate, a.channels, a.frames())
}
