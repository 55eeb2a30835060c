"""Gemini's generateContent format (gateway/formats/gemini/)."""
